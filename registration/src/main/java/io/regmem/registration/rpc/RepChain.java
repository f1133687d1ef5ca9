package io.regmem.registration.rpc;

import io.regmem.core.RdmaException;
import io.regmem.registration.WorkRequest;
import java.util.function.Consumer;

/**
 * Posting replies as receives, in one chain ({@code rpcrdma_post_recvs}'s body): what a transport's
 * own receives and {@link SharedReceives} share. One poster at a time (the caller's guard).
 */
final class RepChain {
    private final RpcBuffer buffer;
    private final WorkRequest[] wrs;
    private final Rep[] posting;
    private final Consumer<WorkRequest> post;

    /**
     * @param max  the longest chain
     * @param post posts a chain: a QP's or an SRQ's {@code postRecv} (all or nothing; throws when refused)
     */
    RepChain(RpcBuffer buffer, int max, Consumer<WorkRequest> post) {
        this.buffer = buffer;
        this.wrs = new WorkRequest[max];
        this.posting = new Rep[max];
        this.post = post;
        for (int i = 0; i < max; i++) {
            wrs[i] = new WorkRequest(1);
        }
    }

    /**
     * Takes up to {@code target} free replies, maps each, gives it its next posting generation and
     * posts them in one chain. Replies that cannot be mapped, or that a refused post did not take, go
     * back to the buffer.
     *
     * @return receives posted (0 when none was free or the post was refused)
     */
    int post(int target) {
        int n = 0;
        int most = Math.min(target, wrs.length);
        while (n < most) {
            Rep rep = buffer.repGet();
            if (rep == null) {
                break;
            }
            if (!rep.buffer.dmaMap(buffer.pd())) {
                buffer.repPut(rep);
                break;
            }
            rep.nextPosting();
            WorkRequest wr = wrs[n].reset().wrId(RpcTransport.recvWrId(rep))
                    .addSge(rep.buffer.address(), rep.buffer.length(), rep.buffer.lkey());
            if (n > 0) {
                wrs[n - 1].next(wr);
            }
            posting[n++] = rep;
        }
        if (n == 0) {
            return 0;
        }
        boolean posted = false;
        try {
            post.accept(wrs[0]);
            posted = true;
        } catch (RdmaException e) {
            // all or nothing: none was posted; the reps go back below
        } finally {
            for (int i = 0; i < n; i++) {
                if (!posted) {
                    buffer.repPut(posting[i]);
                }
                posting[i] = null;
            }
        }
        return posted ? n : 0;
    }
}
