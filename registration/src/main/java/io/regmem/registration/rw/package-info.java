/**
 * The kernel's RDMA read/write API ({@code drivers/infiniband/core/rw.c}) over the verbs classes:
 * {@link io.regmem.registration.rw.RwContext} turns a scatterlist and a remote address into the work
 * requests of one RDMA READ or WRITE (plain SGEs, MR registrations with local invalidation, or
 * signature MRs), chained and posted with one doorbell; {@link io.regmem.registration.rw.RwChain}
 * posts several contexts as one chain; {@link io.regmem.registration.rw.RdmaRw} holds the sizing
 * rules ({@code rdma_rw_mr_factor}, {@code rdma_rw_max_send_wr}). Provider-neutral: it uses the
 * public verbs API only, so it runs on every provider alike.
 */
package io.regmem.registration.rw;
