package io.regmem.registration.fuzz;

/**
 * How long the API fuzz runs and from which seed: {@code -Dregmem.fuzz.ops=N} operations (CI:
 * 10,000; the {@code soak} profile: 1,000,000), {@code -Dregmem.fuzz.seed=S} to replay a run (the
 * seed of every run is printed, and is in every failure's message), {@code -Dregmem.provider=NAME}
 * for the provider (default soft).
 */
final class FuzzBudget {
    private FuzzBudget() {
    }

    static int ops(int ciDefault) {
        return Integer.getInteger("regmem.fuzz.ops", ciDefault);
    }

    static long seed() {
        String s = System.getProperty("regmem.fuzz.seed");
        return s != null ? Long.parseLong(s) : new java.util.SplittableRandom().nextLong();
    }

    static String provider() {
        return System.getProperty("regmem.provider", "soft");
    }
}
