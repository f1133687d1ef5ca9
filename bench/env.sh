# Sourced by the bench scripts (bash): here (the checkout), JAVA_HOME (a JDK 25 or newer, found by
# .ci/find-jdk.sh) first on PATH, and jar (the bench jar: ./mvnw -q -DskipTests package builds it;
# BENCH_JAR names another, for an A/B of two builds).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$here/.ci/find-jdk.sh"
regmem_find_jdk
export PATH="$JAVA_HOME/bin:$PATH"
jar="${BENCH_JAR:-$here/bench/target/regmem.jar}"
