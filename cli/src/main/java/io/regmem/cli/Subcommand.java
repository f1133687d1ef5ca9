package io.regmem.cli;

/**
 * A subcommand another module adds to {@code regmem} (the benchmarks add {@code bench}): a picocli
 * command object, found through {@link java.util.ServiceLoader} when the command line starts.
 */
public interface Subcommand {

    /** A new picocli command object (a class annotated {@code @Command}, with its name). */
    Object command();
}
