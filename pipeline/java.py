"""The Java runtime Spark needs: found, its version read, and the JVM options Spark on Ray
needs on JDK 17 (docs/design.md, "Facts about the stack"). Installing Java is
``scripts/ensure-java``'s (the README's commands); a user's machine is told how."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from dynbucket.base.errors import JavaNotFoundError

# Packages of java.base that Spark and RayDP reach into reflectively. Without these, RayDP's
# executor actor dies inside Ray's serializer on JDK 17 (measured; docs/design.md).
JDK17_OPEN_PACKAGES: tuple[str, ...] = (
    "java.lang",
    "java.lang.invoke",
    "java.lang.reflect",
    "java.io",
    "java.net",
    "java.nio",
    "java.math",
    "java.text",
    "java.time",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.util.regex",
    "java.util.stream",
    "jdk.internal.ref",
    "jdk.internal.misc",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
)

_INSTALL_JAVA = (
    "install OpenJDK 17 (Debian/Ubuntu: `sudo apt-get install -y openjdk-17-jre-headless`) "
    "or set JAVA_HOME to an existing JDK 11 or 17"
)


def jdk_java_options() -> str:
    """The JVM options Spark on Ray needs on JDK 17 (harmless on JDK 11)."""
    opens = [f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in JDK17_OPEN_PACKAGES]
    return " ".join([*opens, "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED"])


def find_java(environ: Mapping[str, str] | None = None) -> tuple[str, int]:
    """Locates the Java runtime Spark will use and returns (path, major version).

    Looks at ``JAVA_HOME`` first, as Spark's launcher does, then at ``PATH``.

    Raises:
        JavaNotFoundError: no Java, or one that does not run.
    """
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home:
        java = os.path.join(java_home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise JavaNotFoundError(
                f"JAVA_HOME={java_home!r} has no executable bin/java; fix JAVA_HOME, or unset "
                f"it and {_INSTALL_JAVA}"
            )
    else:
        found = shutil.which("java", path=env.get("PATH", ""))
        if found is None:
            raise JavaNotFoundError(
                "Spark needs a Java runtime and none was found: `java` is not on PATH and "
                f"JAVA_HOME is not set; {_INSTALL_JAVA}"
            )
        java = found
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise JavaNotFoundError(f"{java} -version failed ({e}); {_INSTALL_JAVA}") from e
    return java, parse_java_major(out.stderr + out.stdout)


def parse_java_major(version_text: str) -> int:
    """Major version from ``java -version`` output (``1.8.0_x`` -> 8, ``17.0.15`` -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if m is None:
        raise JavaNotFoundError(f"cannot read a Java version from: {version_text.strip()!r}")
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major
