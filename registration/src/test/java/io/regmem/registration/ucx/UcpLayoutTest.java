package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.NoLeaks;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The struct sizes, field offsets and constants {@link Ucp} uses are those of the installed UCX
 * headers: a C program ({@code ucx/layout.c}) prints them with {@code sizeof}/{@code offsetof}, and
 * each must equal the Java constant. Needs gcc and {@code libucx-dev} (CI installs both).
 */
@ExtendWith(NoLeaks.class)
class UcpLayoutTest {

    /** C name (as layout.c prints it) to the constant regmem uses. */
    static Map<String, Long> expected() {
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("ucp_params_t", Ucp.PARAMS_SIZE);
        m.put("ucp_params_t.field_mask", Ucp.PARAMS_FIELD_MASK);
        m.put("ucp_params_t.features", Ucp.PARAMS_FEATURES);
        m.put("ucp_params_t.name", Ucp.PARAMS_NAME);
        m.put("ucp_worker_params_t", Ucp.WORKER_PARAMS_SIZE);
        m.put("ucp_worker_params_t.field_mask", Ucp.WORKER_PARAMS_FIELD_MASK);
        m.put("ucp_worker_params_t.thread_mode", Ucp.WORKER_PARAMS_THREAD_MODE);
        m.put("ucp_mem_map_params_t", Ucp.MEM_MAP_PARAMS_SIZE);
        m.put("ucp_mem_map_params_t.field_mask", Ucp.MEM_MAP_FIELD_MASK);
        m.put("ucp_mem_map_params_t.address", Ucp.MEM_MAP_ADDRESS);
        m.put("ucp_mem_map_params_t.length", Ucp.MEM_MAP_LENGTH);
        m.put("ucp_mem_map_params_t.flags", Ucp.MEM_MAP_FLAGS);
        m.put("ucp_ep_params_t", Ucp.EP_PARAMS_SIZE);
        m.put("ucp_ep_params_t.field_mask", Ucp.EP_PARAMS_FIELD_MASK);
        m.put("ucp_ep_params_t.address", Ucp.EP_PARAMS_ADDRESS);
        m.put("ucp_ep_params_t.err_mode", Ucp.EP_PARAMS_ERR_MODE);
        m.put("ucp_ep_params_t.err_handler", Ucp.EP_PARAMS_ERR_HANDLER);
        m.put("ucp_ep_params_t.user_data", Ucp.EP_PARAMS_USER_DATA);
        m.put("ucp_request_param_t", Ucp.REQUEST_PARAM_SIZE);
        m.put("ucp_request_param_t.op_attr_mask", Ucp.REQUEST_PARAM_OP_ATTR_MASK);
        m.put("ucp_request_param_t.flags", Ucp.REQUEST_PARAM_FLAGS);
        m.put("ucp_request_param_t.cb", Ucp.REQUEST_PARAM_CB);
        m.put("ucp_request_param_t.user_data", Ucp.REQUEST_PARAM_USER_DATA);
        m.put("ucp_request_param_t.memh", Ucp.REQUEST_PARAM_MEMH);
        m.put("ucp_mem_attr_t", Ucp.MEM_ATTR_SIZE);
        m.put("ucp_mem_attr_t.field_mask", Ucp.MEM_ATTR_FIELD_MASK);
        m.put("ucp_mem_attr_t.address", Ucp.MEM_ATTR_ADDRESS);
        m.put("ucp_mem_attr_t.length", Ucp.MEM_ATTR_LENGTH);
        m.put("UCP_PARAM_FIELD_FEATURES", Ucp.PARAM_FIELD_FEATURES);
        m.put("UCP_PARAM_FIELD_NAME", Ucp.PARAM_FIELD_NAME);
        m.put("UCP_FEATURE_RMA", Ucp.FEATURE_RMA);
        m.put("UCP_FEATURE_AM", Ucp.FEATURE_AM);
        m.put("UCP_WORKER_PARAM_FIELD_THREAD_MODE", Ucp.WORKER_PARAM_FIELD_THREAD_MODE);
        m.put("UCS_THREAD_MODE_SINGLE", (long) Ucp.THREAD_MODE_SINGLE);
        m.put("UCS_THREAD_MODE_SERIALIZED", (long) Ucp.THREAD_MODE_SERIALIZED);
        m.put("UCS_THREAD_MODE_MULTI", (long) Ucp.THREAD_MODE_MULTI);
        m.put("UCP_MEM_MAP_PARAM_FIELD_ADDRESS", Ucp.MEM_MAP_PARAM_FIELD_ADDRESS);
        m.put("UCP_MEM_MAP_PARAM_FIELD_LENGTH", Ucp.MEM_MAP_PARAM_FIELD_LENGTH);
        m.put("UCP_MEM_MAP_PARAM_FIELD_FLAGS", Ucp.MEM_MAP_PARAM_FIELD_FLAGS);
        m.put("UCP_MEM_MAP_ALLOCATE", (long) Ucp.MEM_MAP_ALLOCATE);
        m.put("UCP_MEM_ATTR_FIELD_ADDRESS", Ucp.MEM_ATTR_FIELD_ADDRESS);
        m.put("UCP_MEM_ATTR_FIELD_LENGTH", Ucp.MEM_ATTR_FIELD_LENGTH);
        m.put("UCP_EP_PARAM_FIELD_REMOTE_ADDRESS", Ucp.EP_PARAM_FIELD_REMOTE_ADDRESS);
        m.put("UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE", Ucp.EP_PARAM_FIELD_ERR_HANDLING_MODE);
        m.put("UCP_EP_PARAM_FIELD_ERR_HANDLER", Ucp.EP_PARAM_FIELD_ERR_HANDLER);
        m.put("UCP_EP_PARAM_FIELD_USER_DATA", Ucp.EP_PARAM_FIELD_USER_DATA);
        m.put("UCP_ERR_HANDLING_MODE_NONE", (long) Ucp.ERR_HANDLING_MODE_NONE);
        m.put("UCP_ERR_HANDLING_MODE_PEER", (long) Ucp.ERR_HANDLING_MODE_PEER);
        m.put("UCP_EP_CLOSE_FLAG_FORCE", (long) Ucp.EP_CLOSE_FLAG_FORCE);
        m.put("UCP_OP_ATTR_FIELD_CALLBACK", (long) Ucp.OP_ATTR_FIELD_CALLBACK);
        m.put("UCP_OP_ATTR_FIELD_USER_DATA", (long) Ucp.OP_ATTR_FIELD_USER_DATA);
        m.put("UCP_OP_ATTR_FIELD_FLAGS", (long) Ucp.OP_ATTR_FIELD_FLAGS);
        m.put("UCP_OP_ATTR_FIELD_MEMH", (long) Ucp.OP_ATTR_FIELD_MEMH);
        m.put("UCS_OK", (long) Ucp.UCS_OK);
        m.put("UCS_INPROGRESS", (long) Ucp.UCS_INPROGRESS);
        m.put("UCS_ERR_INVALID_PARAM", (long) Ucp.UCS_ERR_INVALID_PARAM);
        m.put("UCS_ERR_UNREACHABLE", (long) Ucp.UCS_ERR_UNREACHABLE);
        m.put("UCS_ERR_CANCELED", (long) Ucp.UCS_ERR_CANCELED);
        m.put("UCS_ERR_UNSUPPORTED", (long) Ucp.UCS_ERR_UNSUPPORTED);
        m.put("UCS_ERR_CONNECTION_RESET", (long) Ucp.UCS_ERR_CONNECTION_RESET);
        m.put("UCS_ERR_ENDPOINT_TIMEOUT", (long) Ucp.UCS_ERR_ENDPOINT_TIMEOUT);
        m.put("UCS_ERR_LAST", Ucp.UCS_ERR_LAST);
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
        Path src = dir.resolve("layout.c");
        try (InputStream in = UcpLayoutTest.class.getResourceAsStream("/ucx/layout.c")) {
            assertThat(in).as("test resource ucx/layout.c").isNotNull();
            Files.copy(in, src);
        }
        Path exe = dir.resolve("layout");
        run(dir, "gcc", "-o", exe.toString(), src.toString());
        String out = run(dir, exe.toString());
        Map<String, Long> actual = new LinkedHashMap<>();
        for (String line : out.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                actual.put(line.substring(0, eq), Long.parseLong(line.substring(eq + 1).strip()));
            }
        }
        Map<String, Long> expected = expected();
        assertThat(actual).as("layout.c's output").containsAllEntriesOf(expected);
    }

    private static String run(Path dir, String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("%s finished", command[0]).isTrue();
        assertThat(p.exitValue()).as("%s: %s", String.join(" ", command), out).isZero();
        return out;
    }
}
