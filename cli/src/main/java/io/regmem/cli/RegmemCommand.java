package io.regmem.cli;

import io.regmem.core.RdmaException;
import java.util.ServiceLoader;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code regmem} command line: {@code regmem demo} runs the main workload on the embedded
 * provider and prints a report; {@code regmem serve} runs the RPC demo's server for a
 * {@code regmem demo --connect} in another process; {@code regmem bench} runs the JMH benchmarks beside their peers
 * and prints ratios.
 */
@Command(name = "regmem", mixinStandardHelpOptions = true, version = "regmem 0.1.0",
        description = "Registered off-heap memory for the JVM.",
        subcommands = {DemoCommand.class, ServeCommand.class})
public final class RegmemCommand implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /** The root command (picocli fills in its spec). */
    public RegmemCommand() {
    }

    /** Runs the command line; exits with its status. */
    public static void main(String[] args) {
        // regmem's log lines (a refused connection, a pool closed with buffers out) one line each
        if (System.getProperty("java.util.logging.SimpleFormatter.format") == null) {
            System.setProperty("java.util.logging.SimpleFormatter.format", "%4$s %3$s: %5$s%6$s%n");
        }
        System.exit(commandLine().execute(args));
    }

    /**
     * The command line, set up as {@code main} runs it: a bad option value is one line on standard
     * error and exit status 2.
     */
    public static CommandLine commandLine() {
        CommandLine root = new CommandLine(new RegmemCommand());
        for (Subcommand extra : ServiceLoader.load(Subcommand.class)) {
            root.addSubcommand(extra.command());
        }
        return root.setParameterExceptionHandler(OptionCheck.handler())
                .setExecutionExceptionHandler((e, cl, parsed) -> {
                    // a command that cannot go on (a device that does not open, an address taken): one line
                    cl.getErr().println("regmem " + cl.getCommandName() + ": " + (e instanceof RdmaException
                            ? e.getMessage() : e.toString()));
                    cl.getErr().flush();
                    return 1;
                });
    }

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }
}
