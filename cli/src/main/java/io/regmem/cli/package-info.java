/**
 * The {@code regmem} command line ({@link io.regmem.cli.RegmemCommand}: {@code demo}, {@code serve},
 * and the subcommands other modules add through {@link io.regmem.cli.Subcommand}, such as the
 * benchmarks' {@code bench}) and its demos: the RDMA WRITE workload, the RPC client and server, the
 * storage server over io_uring.
 */
package io.regmem.cli;
