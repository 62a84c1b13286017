package io.bloomguard;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A test class's redis-server (and, if asked, a Client on it), one per class: registered as
 * {@code @RegisterExtension static final RedisExtension env = ...}, it starts the server before the
 * class's own {@code @BeforeAll} methods and closes the client, then the server, after its
 * {@code @AfterAll} methods (JUnit runs an extension's callbacks around the class's), so what a
 * class sets up on top of them (a Redisson client) is torn down first.
 */
final class RedisExtension implements BeforeAllCallback, AfterAllCallback {
    /** Starts the class's server: RedisServer::start, or a server with a password or TLS. */
    interface Starter {
        RedisServer start() throws Exception;
    }

    /** Opens the class's client on the server's URL. */
    interface Opener {
        Client open(String url) throws Exception;
    }

    private final Starter starter;
    private final Opener opener;
    private RedisServer redis;
    private Client client;

    private RedisExtension(Starter starter, Opener opener) {
        this.starter = starter;
        this.opener = opener;
    }

    /** A plain server, no client. */
    static RedisExtension server() {
        return new RedisExtension(RedisServer::start, null);
    }

    /** The server that starter starts, no client. */
    static RedisExtension server(Starter starter) {
        return new RedisExtension(starter, null);
    }

    /** A plain server and a client with the default options. */
    static RedisExtension withClient() {
        return withClient(Client::open);
    }

    /** A plain server and the client that opener opens on it. */
    static RedisExtension withClient(Opener opener) {
        return new RedisExtension(RedisServer::start, opener);
    }

    RedisServer redis() {
        return redis;
    }

    Client client() {
        if (opener == null)
            throw new IllegalStateException("this RedisExtension opens no client (use withClient)");
        return client;
    }

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        redis = starter.start();
        if (opener != null)
            client = opener.open(redis.url());
    }

    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        try {
            if (client != null)
                client.close();
        } finally {
            client = null;
            if (redis != null)
                redis.close();
            redis = null;
        }
    }
}
