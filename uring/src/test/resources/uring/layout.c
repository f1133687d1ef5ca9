/* Prints the io_uring and statx ABI values regmem's UringLayout hard-codes (see UringLayoutTest). */
#include <linux/io_uring.h>
#include <linux/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <stddef.h>
#include <stdio.h>

#define SZ(t) printf("%s=%zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("%s.%s=%zu\n", #t, #f, offsetof(struct t, f))
#define C(c) printf("%s=%lld\n", #c, (long long) (c))

int main(void) {
    C(__NR_io_uring_setup); C(__NR_io_uring_enter); C(__NR_io_uring_register);
    SZ(io_uring_params); OFF(io_uring_params, sq_entries); OFF(io_uring_params, cq_entries);
    OFF(io_uring_params, flags); OFF(io_uring_params, features); OFF(io_uring_params, sq_off);
    OFF(io_uring_params, cq_off);
    OFF(io_sqring_offsets, head); OFF(io_sqring_offsets, tail); OFF(io_sqring_offsets, ring_mask);
    OFF(io_sqring_offsets, ring_entries); OFF(io_sqring_offsets, flags); OFF(io_sqring_offsets, dropped);
    OFF(io_sqring_offsets, array);
    OFF(io_cqring_offsets, head); OFF(io_cqring_offsets, tail); OFF(io_cqring_offsets, ring_mask);
    OFF(io_cqring_offsets, ring_entries); OFF(io_cqring_offsets, overflow); OFF(io_cqring_offsets, cqes);
    SZ(io_uring_sqe); OFF(io_uring_sqe, opcode); OFF(io_uring_sqe, flags); OFF(io_uring_sqe, ioprio);
    OFF(io_uring_sqe, fd); OFF(io_uring_sqe, off); OFF(io_uring_sqe, addr); OFF(io_uring_sqe, len);
    OFF(io_uring_sqe, rw_flags); OFF(io_uring_sqe, user_data); OFF(io_uring_sqe, buf_index);
    SZ(io_uring_cqe); OFF(io_uring_cqe, user_data); OFF(io_uring_cqe, res); OFF(io_uring_cqe, flags);
    SZ(io_uring_rsrc_register); OFF(io_uring_rsrc_register, nr); OFF(io_uring_rsrc_register, flags);
    OFF(io_uring_rsrc_register, data); OFF(io_uring_rsrc_register, tags);
    SZ(io_uring_rsrc_update2); OFF(io_uring_rsrc_update2, offset); OFF(io_uring_rsrc_update2, data);
    OFF(io_uring_rsrc_update2, tags); OFF(io_uring_rsrc_update2, nr);
    SZ(iovec);
    SZ(statx); OFF(statx, stx_mask); OFF(statx, stx_size); OFF(statx, stx_mode);
    OFF(statx, stx_dio_mem_align); OFF(statx, stx_dio_offset_align);
    C(STATX_BASIC_STATS); C(STATX_DIOALIGN);
    C(IORING_SETUP_CQSIZE); C(IORING_SETUP_CLAMP); C(IORING_SETUP_SUBMIT_ALL); C(IORING_SETUP_COOP_TASKRUN);
    C(IORING_SETUP_TASKRUN_FLAG); C(IORING_SETUP_SINGLE_ISSUER); C(IORING_SETUP_DEFER_TASKRUN);
    C(IORING_FEAT_SINGLE_MMAP); C(IORING_FEAT_NODROP);
    C(IORING_SQ_NEED_WAKEUP); C(IORING_SQ_CQ_OVERFLOW); C(IORING_SQ_TASKRUN);
    C(IORING_ENTER_GETEVENTS);
    C(IORING_OFF_SQ_RING); C(IORING_OFF_CQ_RING); C(IORING_OFF_SQES);
    C(IORING_OP_NOP); C(IORING_OP_FSYNC); C(IORING_OP_READ_FIXED); C(IORING_OP_WRITE_FIXED);
    C(IORING_OP_ASYNC_CANCEL); C(IORING_OP_READ); C(IORING_OP_WRITE);
    C(IOSQE_FIXED_FILE); C(IORING_FSYNC_DATASYNC); C(IORING_ASYNC_CANCEL_ANY);
    C(IORING_REGISTER_BUFFERS2); C(IORING_REGISTER_BUFFERS_UPDATE); C(IORING_REGISTER_FILES2);
    C(IORING_REGISTER_FILES_UPDATE2); C(IORING_UNREGISTER_BUFFERS); C(IORING_UNREGISTER_FILES);
    C(IORING_RSRC_REGISTER_SPARSE);
    return 0;
}
