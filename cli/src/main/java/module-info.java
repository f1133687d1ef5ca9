/**
 * The {@code regmem} command line and its demos. The benchmarks add {@code regmem bench} through
 * {@link io.regmem.cli.Subcommand}; the ucx provider, when on the module path, serves
 * {@code --provider ucx}.
 *
 * <p>Run it with {@code --enable-native-access=io.regmem.core,io.regmem.registration,io.regmem.uring}
 * (and {@code io.regmem.shm,io.regmem.ucx} for those providers, which service binding finds on the
 * module path).
 */
module io.regmem.cli {
    requires transitive io.regmem.registration; // (SoftPair's API names its types)
    requires io.regmem.uring;
    requires transitive info.picocli; // (RegmemCommand's and OptionCheck's API names its types)
    requires HdrHistogram;
    requires jdk.jfr;
    requires org.jctools.core;

    exports io.regmem.cli;
    opens io.regmem.cli to info.picocli;

    uses io.regmem.cli.Subcommand;
    uses io.regmem.registration.spi.RdmaProvider; // the demo lists the providers it can run on
}
