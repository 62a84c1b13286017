package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** A server requiring a password: given in the URL or as an option; a wrong one fails, unquoted. */
class AuthTest {
    static final String SECRET = "s3cret-Pa55";

    @RegisterExtension
    static final RedisExtension env = RedisExtension.server(() -> RedisServer.startWithPassword(SECRET));

    @Test
    void passwordAsAnOption() throws Exception {
        var o = Client.Options.builder().password(SECRET).clientName("java-auth-test").build();
        try (Client c = Client.open(env.redis().url(), o); Filter f = c.filter("auth:opt")) {
            f.init(100, 0.01);
            assertTrue(f.add("x"));
            assertTrue(f.contains("x"));
            assertTrue(new String((byte[]) env.redis().call("CLIENT", "LIST"), java.nio.charset.StandardCharsets.UTF_8)
                           .contains("name=java-auth-test"));
        }
    }

    @Test
    void passwordInTheUrl() {
        try (Client c = Client.open("redis://:" + SECRET + "@127.0.0.1:" + env.redis().port); Filter f = c.filter("auth:url")) {
            f.init(100, 0.01);
            assertTrue(f.add("x"));
        }
    }

    @Test
    void aWrongPasswordFailsWithoutQuotingIt() {
        var o = Client.Options.builder().password("wrong-Secret-9").connectAtOpen(true).build();
        var e = assertThrows(BloomGuardException.AuthFailed.class, () -> Client.open(env.redis().url(), o));
        assertEquals(-9, e.code());
        assertFalse(e.getMessage().contains("wrong-Secret-9"), e.getMessage());
        try (Client c = Client.open(env.redis().url()); Filter f = c.filter("auth:none")) {
            assertThrows(BloomGuardException.AuthFailed.class, () -> f.contains("x"), "no password at all");
        }
    }

    @Test
    void stringOptionsRefuseNulls() {
        assertThrows(NullPointerException.class, () -> Client.Options.builder().password(null));
        assertThrows(IllegalArgumentException.class, () -> Client.Options.builder().username("a\0b"));
    }
}
