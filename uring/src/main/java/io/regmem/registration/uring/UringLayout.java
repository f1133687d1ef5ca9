package io.regmem.registration.uring;

/**
 * The kernel's io_uring ABI as regmem uses it: offsets in {@code struct io_uring_params},
 * {@code struct io_uring_sqe}, {@code struct io_uring_cqe}, the resource-registration structs and
 * {@code struct statx}, and the constants of {@code <linux/io_uring.h>}. The UAPI structs are
 * stable (fields are only ever added at the end or in reserved space); {@code UringLayoutTest}
 * checks every value here against the installed headers with {@code offsetof}.
 */
final class UringLayout {
    private UringLayout() {
    }

    // x86-64 and aarch64 (asm-generic) syscall numbers: io_uring has the same on both
    static final long SYS_IO_URING_SETUP = 425;
    static final long SYS_IO_URING_ENTER = 426;
    static final long SYS_IO_URING_REGISTER = 427;

    // struct io_uring_params
    static final long PARAMS_SIZE = 120;
    static final long PARAMS_SQ_ENTRIES = 0;
    static final long PARAMS_CQ_ENTRIES = 4;
    static final long PARAMS_FLAGS = 8;
    static final long PARAMS_FEATURES = 20;
    static final long PARAMS_SQ_OFF = 40;
    static final long PARAMS_CQ_OFF = 80;
    // struct io_sqring_offsets (relative to sq_off)
    static final long SQ_OFF_HEAD = 0;
    static final long SQ_OFF_TAIL = 4;
    static final long SQ_OFF_RING_MASK = 8;
    static final long SQ_OFF_RING_ENTRIES = 12;
    static final long SQ_OFF_FLAGS = 16;
    static final long SQ_OFF_DROPPED = 20;
    static final long SQ_OFF_ARRAY = 24;
    // struct io_cqring_offsets (relative to cq_off)
    static final long CQ_OFF_HEAD = 0;
    static final long CQ_OFF_TAIL = 4;
    static final long CQ_OFF_RING_MASK = 8;
    static final long CQ_OFF_RING_ENTRIES = 12;
    static final long CQ_OFF_OVERFLOW = 16;
    static final long CQ_OFF_CQES = 20;

    // struct io_uring_sqe
    static final long SQE_SIZE = 64;
    static final long SQE_OPCODE = 0;
    static final long SQE_FLAGS = 1;
    static final long SQE_IOPRIO = 2;
    static final long SQE_FD = 4;
    static final long SQE_OFF = 8;
    static final long SQE_ADDR = 16;
    static final long SQE_LEN = 24;
    static final long SQE_RW_FLAGS = 28;
    static final long SQE_USER_DATA = 32;
    static final long SQE_BUF_INDEX = 40;
    // struct io_uring_cqe
    static final long CQE_SIZE = 16;
    static final long CQE_USER_DATA = 0;
    static final long CQE_RES = 8;
    static final long CQE_FLAGS = 12;

    // struct io_uring_rsrc_register
    static final long RSRC_REGISTER_SIZE = 32;
    static final long RSRC_REGISTER_NR = 0;
    static final long RSRC_REGISTER_FLAGS = 4;
    static final long RSRC_REGISTER_DATA = 16;
    static final long RSRC_REGISTER_TAGS = 24;
    // struct io_uring_rsrc_update2
    static final long RSRC_UPDATE2_SIZE = 32;
    static final long RSRC_UPDATE2_OFFSET = 0;
    static final long RSRC_UPDATE2_DATA = 8;
    static final long RSRC_UPDATE2_TAGS = 16;
    static final long RSRC_UPDATE2_NR = 24;
    // struct iovec
    static final long IOVEC_SIZE = 16;

    // struct statx
    static final long STATX_SIZE = 256;
    static final long STATX_MASK = 0;
    static final long STATX_SIZE_FIELD = 40;
    static final long STATX_MODE = 28;
    static final long STATX_DIO_MEM_ALIGN = 152;
    static final long STATX_DIO_OFFSET_ALIGN = 156;
    static final int STATX_BASIC_STATS = 0x7ff;
    static final int STATX_DIOALIGN = 0x2000;

    // setup flags
    static final int SETUP_CQSIZE = 1 << 3;
    static final int SETUP_CLAMP = 1 << 4;
    static final int SETUP_SUBMIT_ALL = 1 << 7;
    static final int SETUP_COOP_TASKRUN = 1 << 8;
    static final int SETUP_TASKRUN_FLAG = 1 << 9;
    static final int SETUP_SINGLE_ISSUER = 1 << 12;
    static final int SETUP_DEFER_TASKRUN = 1 << 13;
    // features
    static final int FEAT_SINGLE_MMAP = 1;
    static final int FEAT_NODROP = 1 << 1;
    // sq ring flags
    static final int SQ_NEED_WAKEUP = 1;
    static final int SQ_CQ_OVERFLOW = 1 << 1;
    static final int SQ_TASKRUN = 1 << 2;
    // enter flags
    static final int ENTER_GETEVENTS = 1;
    // mmap offsets
    static final long OFF_SQ_RING = 0L;
    static final long OFF_CQ_RING = 0x8000000L;
    static final long OFF_SQES = 0x10000000L;
    // opcodes
    static final byte OP_NOP = 0;
    static final byte OP_FSYNC = 3;
    static final byte OP_READ_FIXED = 4;
    static final byte OP_WRITE_FIXED = 5;
    static final byte OP_ASYNC_CANCEL = 14;
    static final byte OP_READ = 22;
    static final byte OP_WRITE = 23;
    // sqe flags
    static final byte SQE_FIXED_FILE = 1;
    // fsync flags
    static final int FSYNC_DATASYNC = 1;
    // async cancel flags
    static final int ASYNC_CANCEL_ANY = 1 << 2;
    // register opcodes
    static final int REGISTER_BUFFERS2 = 15;
    static final int REGISTER_BUFFERS_UPDATE = 16;
    static final int REGISTER_FILES2 = 13;
    static final int REGISTER_FILES_UPDATE2 = 14;
    static final int UNREGISTER_BUFFERS = 1;
    static final int UNREGISTER_FILES = 3;
    static final int RSRC_REGISTER_SPARSE = 1;

    // the kernel's limits (io_uring/rsrc.h, io_uring.c)
    static final int MAX_FIXED_BUFFERS = 1 << 14;
    static final long MAX_FIXED_BUFFER_BYTES = 1L << 30;
    static final int MAX_ENTRIES = 32768;
}
