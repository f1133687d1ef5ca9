package io.regmem.bench;

import io.regmem.cli.Subcommand;

/** Adds {@code regmem bench} to the command line when the benchmarks are on the class path. */
public final class BenchSubcommand implements Subcommand {

    /** Made by {@link java.util.ServiceLoader}. */
    public BenchSubcommand() {
    }

    @Override
    public Object command() {
        return new BenchCommand();
    }
}
