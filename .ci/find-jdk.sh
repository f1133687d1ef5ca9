# Sourced by .ci/run, ./mvnw and ./regmem (POSIX sh): sets JAVA_HOME to a JDK 25 or newer, or fails clearly.
# Order: JAVA_HOME if it is already 25+, else the Temurin 25 JDK under /usr/lib/jvm, else any 25+ JDK there.
regmem_java_major() {
  "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -n 1
}
regmem_find_jdk() {
  local candidate major
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    major=$(regmem_java_major "$JAVA_HOME")
    if [ -n "$major" ] && [ "${major%%.*}" -ge 25 ] 2>/dev/null; then
      return 0
    fi
  fi
  for candidate in /usr/lib/jvm/temurin-25-jdk* /usr/lib/jvm/*; do
    [ -x "$candidate/bin/java" ] && [ -x "$candidate/bin/javac" ] || continue
    major=$(regmem_java_major "$candidate")
    if [ -n "$major" ] && [ "${major%%.*}" -ge 25 ] 2>/dev/null; then
      export JAVA_HOME="$candidate"
      return 0
    fi
  done
  echo "regmem needs a JDK 25 or newer: none found (JAVA_HOME=${JAVA_HOME:-unset}, nothing suitable under /usr/lib/jvm)." >&2
  echo "Install Temurin 25 (e.g. under /usr/lib/jvm/temurin-25-jdk-amd64) or point JAVA_HOME at a JDK 25." >&2
  return 1
}
