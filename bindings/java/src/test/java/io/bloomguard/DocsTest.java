package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Every ```java block of docs/java.md and README.md compiles against the binding (and Redisson, for
 * the migration example) and runs against a redis-server of its own: a block is a whole program
 * (its public class's main runs), its URL redis://127.0.0.1:6379 rewritten to the test server's,
 * the server emptied before each. A block preceded by "<!-- snippet: skip (why) -->" is not run.
 */
class DocsTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.server();
    static final String DOC_URL = "redis://127.0.0.1:6379";

    record Block(String page, int line, String code) {}

    static List<Block> blocks(String page) throws Exception {
        Path p = Path.of(System.getProperty("bloomguard.repo", "../.."), page);
        List<String> lines = Files.readAllLines(p, StandardCharsets.UTF_8);
        List<Block> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (!lines.get(i).equals("```java"))
                continue;
            boolean skip = i > 0 && lines.get(i - 1).startsWith("<!-- snippet: skip");
            StringBuilder b = new StringBuilder();
            int start = i + 1;
            for (i++; i < lines.size() && !lines.get(i).equals("```"); i++)
                b.append(lines.get(i)).append('\n');
            if (!skip)
                out.add(new Block(page, start, b.toString()));
        }
        return out;
    }

    static void run(Block b, Path dir) throws Exception {
        Matcher m = Pattern.compile("public class (\\w+)").matcher(b.code());
        assertTrue(m.find(), b.page() + ":" + b.line() + ": a java block is a whole program with a public class");
        String cls = m.group(1);
        Path src = dir.resolve(cls + ".java");
        Files.writeString(src, b.code().replace(DOC_URL, env.redis().url()));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        int rc = javac.run(null, null, null, "-cp", System.getProperty("java.class.path"), "-d", dir.toString(),
                           src.toString());
        assertEquals(0, rc, b.page() + ":" + b.line() + ": " + cls + " does not compile");
        env.redis().call("FLUSHALL");
        // the binding's classes come from the parent loader: the native library is loaded once
        try (URLClassLoader l = new URLClassLoader(new URL[] {dir.toUri().toURL()},
                                                   DocsTest.class.getClassLoader())) {
            Method main = l.loadClass(cls).getMethod("main", String[].class);
            main.invoke(null, (Object) new String[0]);
        }
    }

    static int runPage(String page) throws Exception {
        Path dir = Files.createTempDirectory("bg-java-snippets-");
        try {
            List<Block> bs = blocks(page);
            for (Block b : bs)
                run(b, dir);
            return bs.size();
        } finally {
            remove(dir);
        }
    }

    static void remove(Path dir) {
        for (File f : dir.toFile().listFiles())
            f.delete();
        dir.toFile().delete();
    }

    @Test
    void javaPage() throws Exception {
        assertEquals(9, runPage("docs/java.md"), "every block of docs/java.md was found");
    }

    @Test
    void readme() throws Exception {
        assertTrue(runPage("README.md") >= 1, "the README has a Java block");
    }

    /** Negative control: a planted block that does not compile, and one that throws, fail. */
    @Test
    void brokenBlocksFail() throws Exception {
        Path dir = Files.createTempDirectory("bg-java-snippets-");
        try {
            plantedBlocksFail(dir);
        } finally {
            remove(dir);
        }
    }

    private static void plantedBlocksFail(Path dir) {
        assertThrows(AssertionError.class, () -> run(new Block("planted", 1,
            "public class Broken { public static void main(String[] a) { io.bloomguard.Client.nope(); } }"), dir));
        var e = assertThrows(java.lang.reflect.InvocationTargetException.class, () -> run(new Block("planted", 2,
            "public class Throws { public static void main(String[] a) {\n"
            + "  try (var c = io.bloomguard.Client.open(\"" + DOC_URL + "\"); var f = c.filter(\"none\")) {\n"
            + "    f.contains(\"x\"); } } }"), dir));
        assertInstanceOf(BloomGuardException.NotInitialized.class, e.getCause());
    }
}
