package io.regmem.registration.ucx;

import io.regmem.registration.Access;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;

/**
 * How a message that consumes a receive is placed at the target ({@link UcxReceiver}): a SEND's bytes
 * into the QP's next posted receive (checked against its local keys, its length against the
 * receive's), a WRITE_WITH_IMM's into its checked remote range and then a receive consumed, a
 * SEND_WITH_INV's invalidation after its data (verbs' order), outside the grace-period section.
 */
final class UcxPlacement {
    private UcxPlacement() {
    }

    /**
     * Places the SEND (SEND_WITH_IMM, SEND_WITH_INV) or WRITE_WITH_IMM in {@code m} into the QP's next
     * receive (execution lock held; {@code src} and {@code dst} the receiver's lists, left empty);
     * returns the sender's status.
     */
    static WcStatus place(UcxInbox.Message m, UcxQp qp, Segments src, Segments dst) {
        QpContext ctx = qp.ctx;
        Opcode op = UcxAm.OPCODES[m.opcode];
        boolean imm = op == Opcode.RDMA_WRITE_WITH_IMM;
        // WRITE_WITH_IMM checks its remote range first (as soft does), and takes a receive (with an SRQ:
        // from the shared queue) only once that passed.
        PostedWr recv = imm ? null : ctx.nextRecv();
        if (recv == null && !imm) {
            return WcStatus.RNR_RETRY_EXC_ERR;
        }
        src.clear();
        dst.clear();
        if (m.length > 0) {
            src.add(Ucp.NATIVE, m.data, m.length);
        }
        GracePeriod.Reader reader = qp.reader;
        reader.enter();
        boolean inside = true;
        try {
            if (imm) {
                if (!ctx.memory().resolveRemote(m.remoteAddress, m.length, m.rkey, Access.REMOTE_WRITE, dst)) {
                    ctx.toError(); // a NAKed protection error breaks the connection at both ends
                    return WcStatus.REM_ACCESS_ERR;
                }
                if (ctx.nextRecv() == null) {
                    return WcStatus.RNR_RETRY_EXC_ERR;
                }
                if (m.length > 0 && Segments.copy(null, src, dst) != Segments.COPIED) {
                    ctx.toError();
                    return WcStatus.REM_ACCESS_ERR;
                }
                ctx.completeRecv(WcStatus.SUCCESS, Opcode.RECV_RDMA_WITH_IMM, m.length, true, m.imm, false, 0, m.solicited());
                return WcStatus.SUCCESS;
            }
            if (!ctx.memory().gatherLocal(recv, dst, true)) {
                ctx.completeRecv(WcStatus.LOC_PROT_ERR, Opcode.RECV, 0, false, 0, false, 0);
                return WcStatus.REM_OP_ERR;
            }
            if (dst.total() < m.length) {
                ctx.completeRecv(WcStatus.LOC_LEN_ERR, Opcode.RECV, 0, false, 0, false, 0);
                return WcStatus.REM_INV_REQ_ERR;
            }
            MrContext invalidated = null;
            if (op == Opcode.SEND_WITH_INV) {
                invalidated = ctx.memory().invalidationTarget(m.invalidate);
                if (invalidated == null) {
                    return WcStatus.REM_INV_REQ_ERR;
                }
            }
            if (m.length > 0) {
                dst.truncate(m.length);
                if (Segments.copy(null, src, dst) != Segments.COPIED) {
                    ctx.completeRecv(WcStatus.LOC_PROT_ERR, Opcode.RECV, 0, false, 0, false, 0);
                    return WcStatus.REM_OP_ERR;
                }
            }
            reader.exit();
            inside = false;
            if (invalidated != null) {
                ctx.memory().invalidate(invalidated); // after the data is placed (verbs order), outside the section
                qp.device.grace.synchronize();
            }
            boolean withImm = op == Opcode.SEND_WITH_IMM;
            ctx.completeRecv(WcStatus.SUCCESS, Opcode.RECV, m.length, withImm, withImm ? m.imm : 0, invalidated != null,
                    m.invalidate, m.solicited());
            return WcStatus.SUCCESS;
        } finally {
            if (inside) {
                reader.exit();
            }
            src.clear();
            dst.clear();
        }
    }
}
