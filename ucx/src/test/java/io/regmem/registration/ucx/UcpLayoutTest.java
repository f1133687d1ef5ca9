package io.regmem.registration.ucx;

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
 * The struct sizes, field offsets and constants of {@link UcpLayout} are those of the installed UCX
 * headers: a C program ({@code ucx/layout.c}) prints them with {@code sizeof}/{@code offsetof}, and
 * each must equal the Java constant. Needs gcc and {@code libucx-dev} (CI installs both).
 */
@ExtendWith(NoLeaks.class)
class UcpLayoutTest {

    /** C name (as layout.c prints it) to the constant regmem uses. */
    static Map<String, Long> expected() {
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("ucp_params_t", UcpLayout.PARAMS_SIZE);
        m.put("ucp_params_t.field_mask", UcpLayout.PARAMS_FIELD_MASK);
        m.put("ucp_params_t.features", UcpLayout.PARAMS_FEATURES);
        m.put("ucp_params_t.name", UcpLayout.PARAMS_NAME);
        m.put("ucp_worker_params_t", UcpLayout.WORKER_PARAMS_SIZE);
        m.put("ucp_worker_params_t.field_mask", UcpLayout.WORKER_PARAMS_FIELD_MASK);
        m.put("ucp_worker_params_t.thread_mode", UcpLayout.WORKER_PARAMS_THREAD_MODE);
        m.put("ucp_mem_map_params_t", UcpLayout.MEM_MAP_PARAMS_SIZE);
        m.put("ucp_mem_map_params_t.field_mask", UcpLayout.MEM_MAP_FIELD_MASK);
        m.put("ucp_mem_map_params_t.address", UcpLayout.MEM_MAP_ADDRESS);
        m.put("ucp_mem_map_params_t.length", UcpLayout.MEM_MAP_LENGTH);
        m.put("ucp_mem_map_params_t.flags", UcpLayout.MEM_MAP_FLAGS);
        m.put("ucp_ep_params_t", UcpLayout.EP_PARAMS_SIZE);
        m.put("ucp_ep_params_t.field_mask", UcpLayout.EP_PARAMS_FIELD_MASK);
        m.put("ucp_ep_params_t.address", UcpLayout.EP_PARAMS_ADDRESS);
        m.put("ucp_ep_params_t.err_mode", UcpLayout.EP_PARAMS_ERR_MODE);
        m.put("ucp_ep_params_t.err_handler", UcpLayout.EP_PARAMS_ERR_HANDLER);
        m.put("ucp_ep_params_t.user_data", UcpLayout.EP_PARAMS_USER_DATA);
        m.put("ucp_request_param_t", UcpLayout.REQUEST_PARAM_SIZE);
        m.put("ucp_request_param_t.op_attr_mask", UcpLayout.REQUEST_PARAM_OP_ATTR_MASK);
        m.put("ucp_request_param_t.flags", UcpLayout.REQUEST_PARAM_FLAGS);
        m.put("ucp_request_param_t.cb", UcpLayout.REQUEST_PARAM_CB);
        m.put("ucp_request_param_t.user_data", UcpLayout.REQUEST_PARAM_USER_DATA);
        m.put("ucp_request_param_t.memh", UcpLayout.REQUEST_PARAM_MEMH);
        m.put("ucp_mem_attr_t", UcpLayout.MEM_ATTR_SIZE);
        m.put("ucp_mem_attr_t.field_mask", UcpLayout.MEM_ATTR_FIELD_MASK);
        m.put("ucp_mem_attr_t.address", UcpLayout.MEM_ATTR_ADDRESS);
        m.put("ucp_mem_attr_t.length", UcpLayout.MEM_ATTR_LENGTH);
        m.put("UCP_PARAM_FIELD_FEATURES", UcpLayout.PARAM_FIELD_FEATURES);
        m.put("UCP_PARAM_FIELD_NAME", UcpLayout.PARAM_FIELD_NAME);
        m.put("UCP_FEATURE_RMA", UcpLayout.FEATURE_RMA);
        m.put("UCP_FEATURE_AM", UcpLayout.FEATURE_AM);
        m.put("UCP_WORKER_PARAM_FIELD_THREAD_MODE", UcpLayout.WORKER_PARAM_FIELD_THREAD_MODE);
        m.put("UCS_THREAD_MODE_SINGLE", (long) UcpLayout.THREAD_MODE_SINGLE);
        m.put("UCS_THREAD_MODE_SERIALIZED", (long) UcpLayout.THREAD_MODE_SERIALIZED);
        m.put("UCS_THREAD_MODE_MULTI", (long) UcpLayout.THREAD_MODE_MULTI);
        m.put("UCP_MEM_MAP_PARAM_FIELD_ADDRESS", UcpLayout.MEM_MAP_PARAM_FIELD_ADDRESS);
        m.put("UCP_MEM_MAP_PARAM_FIELD_LENGTH", UcpLayout.MEM_MAP_PARAM_FIELD_LENGTH);
        m.put("UCP_MEM_MAP_PARAM_FIELD_FLAGS", UcpLayout.MEM_MAP_PARAM_FIELD_FLAGS);
        m.put("UCP_MEM_MAP_ALLOCATE", (long) UcpLayout.MEM_MAP_ALLOCATE);
        m.put("UCP_MEM_ATTR_FIELD_ADDRESS", UcpLayout.MEM_ATTR_FIELD_ADDRESS);
        m.put("UCP_MEM_ATTR_FIELD_LENGTH", UcpLayout.MEM_ATTR_FIELD_LENGTH);
        m.put("UCP_EP_PARAM_FIELD_REMOTE_ADDRESS", UcpLayout.EP_PARAM_FIELD_REMOTE_ADDRESS);
        m.put("UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE", UcpLayout.EP_PARAM_FIELD_ERR_HANDLING_MODE);
        m.put("UCP_EP_PARAM_FIELD_ERR_HANDLER", UcpLayout.EP_PARAM_FIELD_ERR_HANDLER);
        m.put("UCP_EP_PARAM_FIELD_USER_DATA", UcpLayout.EP_PARAM_FIELD_USER_DATA);
        m.put("UCP_ERR_HANDLING_MODE_NONE", (long) UcpLayout.ERR_HANDLING_MODE_NONE);
        m.put("UCP_ERR_HANDLING_MODE_PEER", (long) UcpLayout.ERR_HANDLING_MODE_PEER);
        m.put("UCP_EP_CLOSE_FLAG_FORCE", (long) UcpLayout.EP_CLOSE_FLAG_FORCE);
        m.put("UCP_OP_ATTR_FIELD_CALLBACK", (long) UcpLayout.OP_ATTR_FIELD_CALLBACK);
        m.put("UCP_OP_ATTR_FIELD_USER_DATA", (long) UcpLayout.OP_ATTR_FIELD_USER_DATA);
        m.put("UCP_OP_ATTR_FIELD_FLAGS", (long) UcpLayout.OP_ATTR_FIELD_FLAGS);
        m.put("UCP_OP_ATTR_FIELD_MEMH", (long) UcpLayout.OP_ATTR_FIELD_MEMH);
        m.put("ucp_request_param_t.datatype", UcpLayout.REQUEST_PARAM_DATATYPE);
        m.put("UCP_OP_ATTR_FIELD_DATATYPE", (long) UcpLayout.OP_ATTR_FIELD_DATATYPE);
        m.put("UCP_DATATYPE_IOV", UcpLayout.DATATYPE_IOV);
        m.put("ucp_dt_iov_t", UcpLayout.DT_IOV_SIZE);
        m.put("ucp_dt_iov_t.buffer", UcpLayout.DT_IOV_BUFFER);
        m.put("ucp_dt_iov_t.length", UcpLayout.DT_IOV_LENGTH);
        m.put("ucp_am_handler_param_t", UcpLayout.AM_HANDLER_PARAM_SIZE);
        m.put("ucp_am_handler_param_t.field_mask", UcpLayout.AM_HANDLER_FIELD_MASK);
        m.put("ucp_am_handler_param_t.id", UcpLayout.AM_HANDLER_ID);
        m.put("ucp_am_handler_param_t.flags", UcpLayout.AM_HANDLER_FLAGS);
        m.put("ucp_am_handler_param_t.cb", UcpLayout.AM_HANDLER_CB);
        m.put("ucp_am_handler_param_t.arg", UcpLayout.AM_HANDLER_ARG);
        m.put("UCP_AM_HANDLER_PARAM_FIELD_ID", UcpLayout.AM_HANDLER_PARAM_FIELD_ID);
        m.put("UCP_AM_HANDLER_PARAM_FIELD_FLAGS", UcpLayout.AM_HANDLER_PARAM_FIELD_FLAGS);
        m.put("UCP_AM_HANDLER_PARAM_FIELD_CB", UcpLayout.AM_HANDLER_PARAM_FIELD_CB);
        m.put("UCP_AM_HANDLER_PARAM_FIELD_ARG", UcpLayout.AM_HANDLER_PARAM_FIELD_ARG);
        m.put("UCP_AM_FLAG_WHOLE_MSG", (long) UcpLayout.AM_FLAG_WHOLE_MSG);
        m.put("UCP_AM_FLAG_PERSISTENT_DATA", (long) UcpLayout.AM_FLAG_PERSISTENT_DATA);
        m.put("UCP_AM_SEND_FLAG_EAGER", (long) UcpLayout.AM_SEND_FLAG_EAGER);
        m.put("ucp_am_recv_param_t.recv_attr", UcpLayout.AM_RECV_PARAM_RECV_ATTR);
        m.put("UCP_AM_RECV_ATTR_FLAG_DATA", UcpLayout.AM_RECV_ATTR_FLAG_DATA);
        m.put("UCP_AM_RECV_ATTR_FLAG_RNDV", UcpLayout.AM_RECV_ATTR_FLAG_RNDV);
        m.put("UCS_OK", (long) UcpLayout.UCS_OK);
        m.put("UCS_INPROGRESS", (long) UcpLayout.UCS_INPROGRESS);
        m.put("UCS_ERR_INVALID_PARAM", (long) UcpLayout.UCS_ERR_INVALID_PARAM);
        m.put("UCS_ERR_UNREACHABLE", (long) UcpLayout.UCS_ERR_UNREACHABLE);
        m.put("UCS_ERR_CANCELED", (long) UcpLayout.UCS_ERR_CANCELED);
        m.put("UCS_ERR_UNSUPPORTED", (long) UcpLayout.UCS_ERR_UNSUPPORTED);
        m.put("UCS_ERR_CONNECTION_RESET", (long) UcpLayout.UCS_ERR_CONNECTION_RESET);
        m.put("UCS_ERR_ENDPOINT_TIMEOUT", (long) UcpLayout.UCS_ERR_ENDPOINT_TIMEOUT);
        m.put("UCS_ERR_LAST", UcpLayout.UCS_ERR_LAST);
        m.put("UCP_API_MAJOR", (long) Ucp.MIN_MAJOR);
        m.put("UCP_API_MINOR", (long) Ucp.MIN_MINOR);
        return m;
    }

    @Test
    void everyOffsetSizeAndConstantMatchesTheInstalledHeaders(@TempDir Path dir) throws IOException, InterruptedException {
        UcxAvailable.require();
        boolean ci = "true".equals(System.getenv("CI"));
        boolean headers = Files.exists(Path.of("/usr/include/ucp/api/ucp.h"));
        if (!ci) {
            Assumptions.assumeTrue(headers, "libucx-dev is not installed");
        }
        Map<String, Long> actual = CLayout.measure("/ucx/layout.c", dir);
        assertThat(actual).as("layout.c's output").containsAllEntriesOf(expected());
    }
}
