package io.regmem.registration.uring;

import io.regmem.registration.testkit.CLayout;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The io_uring ABI values of {@link UringLayout} are those of the installed kernel headers: a C
 * program ({@code uring/layout.c}) prints them with {@code sizeof}/{@code offsetof}, and each must
 * equal the Java constant. Needs gcc and the Linux UAPI headers (CI installs both).
 */
@ExtendWith(NoLeaks.class)
class UringLayoutTest {

    static Map<String, Long> expected() {
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("__NR_io_uring_setup", UringLayout.SYS_IO_URING_SETUP);
        m.put("__NR_io_uring_enter", UringLayout.SYS_IO_URING_ENTER);
        m.put("__NR_io_uring_register", UringLayout.SYS_IO_URING_REGISTER);
        m.put("io_uring_params", UringLayout.PARAMS_SIZE);
        m.put("io_uring_params.sq_entries", UringLayout.PARAMS_SQ_ENTRIES);
        m.put("io_uring_params.cq_entries", UringLayout.PARAMS_CQ_ENTRIES);
        m.put("io_uring_params.flags", UringLayout.PARAMS_FLAGS);
        m.put("io_uring_params.features", UringLayout.PARAMS_FEATURES);
        m.put("io_uring_params.sq_off", UringLayout.PARAMS_SQ_OFF);
        m.put("io_uring_params.cq_off", UringLayout.PARAMS_CQ_OFF);
        m.put("io_sqring_offsets.head", UringLayout.SQ_OFF_HEAD);
        m.put("io_sqring_offsets.tail", UringLayout.SQ_OFF_TAIL);
        m.put("io_sqring_offsets.ring_mask", UringLayout.SQ_OFF_RING_MASK);
        m.put("io_sqring_offsets.ring_entries", UringLayout.SQ_OFF_RING_ENTRIES);
        m.put("io_sqring_offsets.flags", UringLayout.SQ_OFF_FLAGS);
        m.put("io_sqring_offsets.dropped", UringLayout.SQ_OFF_DROPPED);
        m.put("io_sqring_offsets.array", UringLayout.SQ_OFF_ARRAY);
        m.put("io_cqring_offsets.head", UringLayout.CQ_OFF_HEAD);
        m.put("io_cqring_offsets.tail", UringLayout.CQ_OFF_TAIL);
        m.put("io_cqring_offsets.ring_mask", UringLayout.CQ_OFF_RING_MASK);
        m.put("io_cqring_offsets.ring_entries", UringLayout.CQ_OFF_RING_ENTRIES);
        m.put("io_cqring_offsets.overflow", UringLayout.CQ_OFF_OVERFLOW);
        m.put("io_cqring_offsets.cqes", UringLayout.CQ_OFF_CQES);
        m.put("io_uring_sqe", UringLayout.SQE_SIZE);
        m.put("io_uring_sqe.opcode", UringLayout.SQE_OPCODE);
        m.put("io_uring_sqe.flags", UringLayout.SQE_FLAGS);
        m.put("io_uring_sqe.ioprio", UringLayout.SQE_IOPRIO);
        m.put("io_uring_sqe.fd", UringLayout.SQE_FD);
        m.put("io_uring_sqe.off", UringLayout.SQE_OFF);
        m.put("io_uring_sqe.addr", UringLayout.SQE_ADDR);
        m.put("io_uring_sqe.len", UringLayout.SQE_LEN);
        m.put("io_uring_sqe.rw_flags", UringLayout.SQE_RW_FLAGS);
        m.put("io_uring_sqe.user_data", UringLayout.SQE_USER_DATA);
        m.put("io_uring_sqe.buf_index", UringLayout.SQE_BUF_INDEX);
        m.put("io_uring_cqe", UringLayout.CQE_SIZE);
        m.put("io_uring_cqe.user_data", UringLayout.CQE_USER_DATA);
        m.put("io_uring_cqe.res", UringLayout.CQE_RES);
        m.put("io_uring_cqe.flags", UringLayout.CQE_FLAGS);
        m.put("io_uring_rsrc_register", UringLayout.RSRC_REGISTER_SIZE);
        m.put("io_uring_rsrc_register.nr", UringLayout.RSRC_REGISTER_NR);
        m.put("io_uring_rsrc_register.flags", UringLayout.RSRC_REGISTER_FLAGS);
        m.put("io_uring_rsrc_register.data", UringLayout.RSRC_REGISTER_DATA);
        m.put("io_uring_rsrc_register.tags", UringLayout.RSRC_REGISTER_TAGS);
        m.put("io_uring_rsrc_update2", UringLayout.RSRC_UPDATE2_SIZE);
        m.put("io_uring_rsrc_update2.offset", UringLayout.RSRC_UPDATE2_OFFSET);
        m.put("io_uring_rsrc_update2.data", UringLayout.RSRC_UPDATE2_DATA);
        m.put("io_uring_rsrc_update2.tags", UringLayout.RSRC_UPDATE2_TAGS);
        m.put("io_uring_rsrc_update2.nr", UringLayout.RSRC_UPDATE2_NR);
        m.put("iovec", UringLayout.IOVEC_SIZE);
        m.put("statx", UringLayout.STATX_SIZE);
        m.put("statx.stx_mask", UringLayout.STATX_MASK);
        m.put("statx.stx_size", UringLayout.STATX_SIZE_FIELD);
        m.put("statx.stx_mode", UringLayout.STATX_MODE);
        m.put("statx.stx_dio_mem_align", UringLayout.STATX_DIO_MEM_ALIGN);
        m.put("statx.stx_dio_offset_align", UringLayout.STATX_DIO_OFFSET_ALIGN);
        m.put("STATX_BASIC_STATS", (long) UringLayout.STATX_BASIC_STATS);
        m.put("STATX_DIOALIGN", (long) UringLayout.STATX_DIOALIGN);
        m.put("IORING_SETUP_CQSIZE", (long) UringLayout.SETUP_CQSIZE);
        m.put("IORING_SETUP_CLAMP", (long) UringLayout.SETUP_CLAMP);
        m.put("IORING_SETUP_SUBMIT_ALL", (long) UringLayout.SETUP_SUBMIT_ALL);
        m.put("IORING_SETUP_COOP_TASKRUN", (long) UringLayout.SETUP_COOP_TASKRUN);
        m.put("IORING_SETUP_TASKRUN_FLAG", (long) UringLayout.SETUP_TASKRUN_FLAG);
        m.put("IORING_SETUP_SINGLE_ISSUER", (long) UringLayout.SETUP_SINGLE_ISSUER);
        m.put("IORING_SETUP_DEFER_TASKRUN", (long) UringLayout.SETUP_DEFER_TASKRUN);
        m.put("IORING_FEAT_SINGLE_MMAP", (long) UringLayout.FEAT_SINGLE_MMAP);
        m.put("IORING_FEAT_NODROP", (long) UringLayout.FEAT_NODROP);
        m.put("IORING_SQ_NEED_WAKEUP", (long) UringLayout.SQ_NEED_WAKEUP);
        m.put("IORING_SQ_CQ_OVERFLOW", (long) UringLayout.SQ_CQ_OVERFLOW);
        m.put("IORING_SQ_TASKRUN", (long) UringLayout.SQ_TASKRUN);
        m.put("IORING_ENTER_GETEVENTS", (long) UringLayout.ENTER_GETEVENTS);
        m.put("IORING_OFF_SQ_RING", UringLayout.OFF_SQ_RING);
        m.put("IORING_OFF_CQ_RING", UringLayout.OFF_CQ_RING);
        m.put("IORING_OFF_SQES", UringLayout.OFF_SQES);
        m.put("IORING_OP_NOP", (long) UringLayout.OP_NOP);
        m.put("IORING_OP_FSYNC", (long) UringLayout.OP_FSYNC);
        m.put("IORING_OP_READ_FIXED", (long) UringLayout.OP_READ_FIXED);
        m.put("IORING_OP_WRITE_FIXED", (long) UringLayout.OP_WRITE_FIXED);
        m.put("IORING_OP_ASYNC_CANCEL", (long) UringLayout.OP_ASYNC_CANCEL);
        m.put("IORING_OP_READ", (long) UringLayout.OP_READ);
        m.put("IORING_OP_WRITE", (long) UringLayout.OP_WRITE);
        m.put("IOSQE_FIXED_FILE", (long) UringLayout.SQE_FIXED_FILE);
        m.put("IORING_FSYNC_DATASYNC", (long) UringLayout.FSYNC_DATASYNC);
        m.put("IORING_ASYNC_CANCEL_ANY", (long) UringLayout.ASYNC_CANCEL_ANY);
        m.put("IORING_REGISTER_BUFFERS2", (long) UringLayout.REGISTER_BUFFERS2);
        m.put("IORING_REGISTER_BUFFERS_UPDATE", (long) UringLayout.REGISTER_BUFFERS_UPDATE);
        m.put("IORING_REGISTER_FILES2", (long) UringLayout.REGISTER_FILES2);
        m.put("IORING_REGISTER_FILES_UPDATE2", (long) UringLayout.REGISTER_FILES_UPDATE2);
        m.put("IORING_UNREGISTER_BUFFERS", (long) UringLayout.UNREGISTER_BUFFERS);
        m.put("IORING_UNREGISTER_FILES", (long) UringLayout.UNREGISTER_FILES);
        m.put("IORING_RSRC_REGISTER_SPARSE", (long) UringLayout.RSRC_REGISTER_SPARSE);
        return m;
    }

    @Test
    void everyOffsetSizeAndConstantMatchesTheInstalledHeaders(@TempDir Path dir) throws IOException, InterruptedException {
        boolean ci = "true".equals(System.getenv("CI"));
        if (!ci) {
            Assumptions.assumeTrue(Files.exists(Path.of("/usr/include/linux/io_uring.h")), "Linux UAPI headers are not installed");
        }
        Map<String, Long> actual = CLayout.measure("/uring/layout.c", dir);
        assertThat(actual).as("layout.c's output").containsAllEntriesOf(expected());
    }
}
