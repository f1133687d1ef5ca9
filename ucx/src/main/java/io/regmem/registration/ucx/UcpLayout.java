package io.regmem.registration.ucx;

/**
 * The UCX constants, struct sizes and field offsets {@link Ucp}'s callers use, as the 1.13 headers
 * define them for x86-64 and aarch64 Linux. A test compiles a C program against the installed
 * headers and compares every value here with {@code sizeof}, {@code offsetof} and the enums.
 */
final class UcpLayout {
    private UcpLayout() {
    }

    // ucs_status_t
    static final int UCS_OK = 0;
    static final int UCS_INPROGRESS = 1;
    static final int UCS_ERR_INVALID_PARAM = -5;
    static final int UCS_ERR_UNREACHABLE = -6;
    static final int UCS_ERR_CANCELED = -16;
    static final int UCS_ERR_UNSUPPORTED = -22;
    static final int UCS_ERR_CONNECTION_RESET = -25;
    static final int UCS_ERR_ENDPOINT_TIMEOUT = -80;
    /** Pointer statuses whose unsigned value is at least this are errors. */
    static final long UCS_ERR_LAST = -100;

    // ucp_params_t
    static final long PARAMS_SIZE = 80;
    static final long PARAMS_FIELD_MASK = 0;
    static final long PARAMS_FEATURES = 8;
    static final long PARAMS_NAME = 72;
    static final long PARAM_FIELD_FEATURES = 1;
    static final long PARAM_FIELD_NAME = 256;
    static final long FEATURE_RMA = 2;
    static final long FEATURE_AM = 64;

    // ucp_worker_params_t
    static final long WORKER_PARAMS_SIZE = 200;
    static final long WORKER_PARAMS_FIELD_MASK = 0;
    static final long WORKER_PARAMS_THREAD_MODE = 8;
    static final long WORKER_PARAM_FIELD_THREAD_MODE = 1;
    static final int THREAD_MODE_SINGLE = 0;
    static final int THREAD_MODE_SERIALIZED = 1;
    static final int THREAD_MODE_MULTI = 2;

    // ucp_mem_map_params_t
    static final long MEM_MAP_PARAMS_SIZE = 40;
    static final long MEM_MAP_FIELD_MASK = 0;
    static final long MEM_MAP_ADDRESS = 8;
    static final long MEM_MAP_LENGTH = 16;
    static final long MEM_MAP_FLAGS = 24;
    static final long MEM_MAP_PARAM_FIELD_ADDRESS = 1;
    static final long MEM_MAP_PARAM_FIELD_LENGTH = 2;
    static final long MEM_MAP_PARAM_FIELD_FLAGS = 4;
    static final long MEM_MAP_PARAM_FIELD_PROT = 8;
    /** ucp_mem_map_params_t.prot (unsigned, after flags). */
    static final long MEM_MAP_PROT = 28;
    static final int MEM_MAP_PROT_LOCAL_READ = 1;
    static final int MEM_MAP_PROT_LOCAL_WRITE = 2;
    static final int MEM_MAP_PROT_REMOTE_READ = 1 << 8;
    static final int MEM_MAP_PROT_REMOTE_WRITE = 1 << 9;
    static final int MEM_MAP_ALLOCATE = 2;

    // ucp_mem_attr_t
    static final long MEM_ATTR_SIZE = 32;
    static final long MEM_ATTR_FIELD_MASK = 0;
    static final long MEM_ATTR_ADDRESS = 8;
    static final long MEM_ATTR_LENGTH = 16;
    static final long MEM_ATTR_FIELD_ADDRESS = 1;
    static final long MEM_ATTR_FIELD_LENGTH = 2;

    // ucp_ep_params_t
    static final long EP_PARAMS_SIZE = 104;
    static final long EP_PARAMS_FIELD_MASK = 0;
    static final long EP_PARAMS_ADDRESS = 8;
    static final long EP_PARAMS_ERR_MODE = 16;
    static final long EP_PARAMS_ERR_HANDLER = 24;
    static final long EP_PARAMS_USER_DATA = 40;
    static final long EP_PARAM_FIELD_REMOTE_ADDRESS = 1;
    static final long EP_PARAM_FIELD_ERR_HANDLING_MODE = 2;
    static final long EP_PARAM_FIELD_ERR_HANDLER = 4;
    static final long EP_PARAM_FIELD_USER_DATA = 8;
    static final int ERR_HANDLING_MODE_NONE = 0;
    static final int ERR_HANDLING_MODE_PEER = 1;
    static final int EP_CLOSE_FLAG_FORCE = 1;

    // ucp_request_param_t
    static final long REQUEST_PARAM_SIZE = 72;
    static final long REQUEST_PARAM_OP_ATTR_MASK = 0;
    static final long REQUEST_PARAM_FLAGS = 4;
    static final long REQUEST_PARAM_CB = 16;
    static final long REQUEST_PARAM_USER_DATA = 32;
    static final long REQUEST_PARAM_MEMH = 64;
    static final int OP_ATTR_FIELD_CALLBACK = 2;
    static final int OP_ATTR_FIELD_USER_DATA = 4;
    static final int OP_ATTR_FIELD_FLAGS = 16;
    static final int OP_ATTR_FIELD_MEMH = 256;

    // ucp_request_param_t.datatype and ucp_dt_iov_t
    static final long REQUEST_PARAM_DATATYPE = 24;
    static final int OP_ATTR_FIELD_DATATYPE = 8;
    static final long DATATYPE_IOV = 2;
    static final long DT_IOV_SIZE = 16;
    static final long DT_IOV_BUFFER = 0;
    static final long DT_IOV_LENGTH = 8;

    // ucp_am_handler_param_t, ucp_am_recv_param_t, AM flags
    static final long AM_HANDLER_PARAM_SIZE = 32;
    static final long AM_HANDLER_FIELD_MASK = 0;
    static final long AM_HANDLER_ID = 8;
    static final long AM_HANDLER_FLAGS = 12;
    static final long AM_HANDLER_CB = 16;
    static final long AM_HANDLER_ARG = 24;
    static final long AM_HANDLER_PARAM_FIELD_ID = 1;
    static final long AM_HANDLER_PARAM_FIELD_FLAGS = 2;
    static final long AM_HANDLER_PARAM_FIELD_CB = 4;
    static final long AM_HANDLER_PARAM_FIELD_ARG = 8;
    static final int AM_FLAG_WHOLE_MSG = 1;
    static final int AM_FLAG_PERSISTENT_DATA = 2;
    static final int AM_SEND_FLAG_EAGER = 2;
    static final int AM_SEND_FLAG_RNDV = 4;
    static final long AM_RECV_PARAM_RECV_ATTR = 0;
    static final long AM_RECV_ATTR_FLAG_DATA = 65536;
    static final long AM_RECV_ATTR_FLAG_RNDV = 131072;
}
