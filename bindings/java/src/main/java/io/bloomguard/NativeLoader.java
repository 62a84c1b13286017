package io.bloomguard;

import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Finds and loads the JNI library, the way zstd-jni and sqlite-jdbc do: the jar carries one per
 * platform under {@code native/<os>-<arch>/libbloomguard_jni.so}; the one for this JVM is copied to
 * a temporary file and {@code System.load}ed. {@code -Dbloomguard.native.path=/path/to/lib.so}
 * loads that file instead (a build for another platform, or a debug build).
 */
final class NativeLoader {
    static final String PATH_PROPERTY = "bloomguard.native.path";
    static final String LIBRARY = "libbloomguard_jni.so";

    private static volatile boolean loaded;
    private static RuntimeException failure;

    private NativeLoader() {}

    static boolean isLoaded() {
        return loaded;
    }

    /** Loads the library once; a failure is thrown again to every later caller. */
    static synchronized void load() {
        if (loaded)
            return;
        if (failure != null)
            throw failure;
        try {
            String override = System.getProperty(PATH_PROPERTY);
            if (override != null && !override.isEmpty()) {
                loadFile(Path.of(override).toAbsolutePath(), "-D" + PATH_PROPERTY);
            } else {
                String platform = platform(System.getProperty("os.name"), System.getProperty("os.arch"));
                URL res = NativeLoader.class.getResource(resource(platform));
                if (res == null)
                    throw missing(platform, System.getProperty("os.name"), System.getProperty("os.arch"));
                loadFile(extract(res), "the jar's " + resource(platform));
            }
            loaded = true;
        } catch (RuntimeException e) {
            failure = e;
            throw e;
        }
    }

    /** "linux-x86_64", "linux-aarch64", ...: the folder of the jar the native for this JVM is in. */
    static String platform(String osName, String osArch) {
        String os = osName == null ? "unknown" : osName.toLowerCase(Locale.ROOT);
        if (os.startsWith("linux"))
            os = "linux";
        else if (os.startsWith("mac") || os.startsWith("darwin"))
            os = "darwin";
        else if (os.startsWith("windows"))
            os = "windows";
        else
            os = os.replaceAll("[^a-z0-9]+", "");
        String arch = osArch == null ? "unknown" : osArch.toLowerCase(Locale.ROOT);
        switch (arch) {
            case "amd64": case "x86_64": case "x86-64": arch = "x86_64"; break;
            case "aarch64": case "arm64": arch = "aarch64"; break;
            default: arch = arch.replaceAll("[^a-z0-9_]+", "");
        }
        return os + "-" + arch;
    }

    static String resource(String platform) {
        return "/native/" + platform + "/" + LIBRARY;
    }

    static BloomGuardException.UnsupportedPlatform missing(String platform, String osName, String osArch) {
        return new BloomGuardException.UnsupportedPlatform(
            "bloomguard: this jar has no native library for " + platform + " (os.name=" + osName + ", os.arch="
            + osArch + "; it looked for " + resource(platform).substring(1) + "). Build one for this platform "
            + "from source (docs/java.md, \"Install\") and pass its path with -D" + PATH_PROPERTY + "=...");
    }

    private static Path extract(URL res) {
        try (InputStream in = res.openStream()) {
            Path tmp = Files.createTempFile("bloomguard-jni-", ".so");
            tmp.toFile().deleteOnExit();
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            return tmp;
        } catch (IOException e) {
            throw new BloomGuardException.NotSupported(-6,
                "bloomguard: cannot copy the native library out of the jar to java.io.tmpdir ("
                + System.getProperty("java.io.tmpdir") + "): " + e.getMessage()
                + "; set -Djava.io.tmpdir to a writable, executable folder or use -D" + PATH_PROPERTY);
        }
    }

    private static void loadFile(Path file, String from) {
        try {
            System.load(file.toString());
        } catch (UnsatisfiedLinkError e) {
            throw new BloomGuardException.NotSupported(-6,
                "bloomguard: cannot load the native library (" + from + ", " + file + "): " + e.getMessage());
        }
    }
}
