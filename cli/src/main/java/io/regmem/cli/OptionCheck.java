package io.regmem.cli;

import java.io.PrintWriter;
import java.util.Collection;
import java.util.function.UnaryOperator;
import picocli.CommandLine;

/**
 * Checks the command line's options before any work starts. A bad value is one line on standard
 * error naming the command, the option, the value and what is allowed, and exit status 2, as for
 * an option picocli cannot parse at all ({@link #handler()}).
 */
public final class OptionCheck {
    /** The exit status of a usage error (as picocli's). */
    public static final int USAGE = 2;

    private final String command;
    private final PrintWriter err;
    private String problem;

    public OptionCheck(String command, PrintWriter err) {
        this.command = command;
        this.err = err;
    }

    /** Records a problem unless one is recorded already (the first bad option is reported). */
    private void fail(String message) {
        if (problem == null) {
            problem = message;
        }
    }

    /** {@code value} must lie in {@code [min, max]}. */
    public OptionCheck range(String option, long value, long min, long max) {
        if (value < min || value > max) {
            fail(option + " " + value + " is out of range: allowed " + min + " to " + max);
        }
        return this;
    }

    /** Every one of {@code values} must lie in {@code [min, max]}, and there must be at least one. */
    public OptionCheck eachInRange(String option, int[] values, long min, long max) {
        if (values == null || values.length == 0) {
            fail(option + " needs at least one value (" + min + " to " + max + ")");
            return this;
        }
        for (int v : values) {
            if (v < min || v > max) {
                fail(option + " " + v + " is out of range: each value allowed " + min + " to " + max);
                break;
            }
        }
        return this;
    }

    /** {@code value} must be one of {@code known}. */
    public OptionCheck oneOf(String option, String value, Collection<String> known, String what) {
        if (!known.contains(value)) {
            fail(option + " '" + value + "' is not " + what + " (known: " + String.join(", ", known) + ")");
        }
        return this;
    }

    /** A rule of the caller's: {@code ok}, or the message. */
    public OptionCheck rule(boolean ok, String message) {
        if (!ok) {
            fail(message);
        }
        return this;
    }

    /** Applies a group of checks kept elsewhere (an option mixin's). */
    public OptionCheck and(UnaryOperator<OptionCheck> more) {
        return more.apply(this);
    }

    /** True if every check passed; else prints the one line and the caller returns {@link #USAGE}. */
    public boolean ok() {
        if (problem == null) {
            return true;
        }
        err.println("regmem " + command + ": " + problem);
        err.flush();
        return false;
    }

    /**
     * For options picocli itself cannot parse (not a number, an unknown option, a bad enum): the
     * one line of picocli's message and a hint, exit status {@link #USAGE}, instead of the whole usage.
     */
    public static CommandLine.IParameterExceptionHandler handler() {
        return (ex, args) -> {
            CommandLine cmd = ex.getCommandLine();
            PrintWriter err = cmd.getErr();
            err.println(cmd.getCommandSpec().qualifiedName() + ": " + ex.getMessage() + " (see "
                    + cmd.getCommandSpec().qualifiedName() + " --help)");
            err.flush();
            return USAGE;
        };
    }
}
