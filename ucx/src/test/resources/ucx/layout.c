#include <stdio.h>
#include <stddef.h>
#include <ucp/api/ucp.h>
#define OFF(t,f) printf("%s.%s=%zu\n", #t, #f, offsetof(t,f))
#define SZ(t) printf("%s=%zu\n", #t, sizeof(t))
#define C(x) printf("%s=%lld\n", #x, (long long)(x))
int main(void) {
  SZ(ucp_params_t); OFF(ucp_params_t, field_mask); OFF(ucp_params_t, features); OFF(ucp_params_t, name);
  SZ(ucp_worker_params_t); OFF(ucp_worker_params_t, field_mask); OFF(ucp_worker_params_t, thread_mode);
  SZ(ucp_mem_map_params_t); OFF(ucp_mem_map_params_t, field_mask); OFF(ucp_mem_map_params_t, address);
  OFF(ucp_mem_map_params_t, length); OFF(ucp_mem_map_params_t, flags); OFF(ucp_mem_map_params_t, prot);
  SZ(ucp_ep_params_t); OFF(ucp_ep_params_t, field_mask); OFF(ucp_ep_params_t, address); OFF(ucp_ep_params_t, err_mode);
  OFF(ucp_ep_params_t, err_handler); OFF(ucp_ep_params_t, user_data);
  SZ(ucp_request_param_t); OFF(ucp_request_param_t, op_attr_mask); OFF(ucp_request_param_t, flags); OFF(ucp_request_param_t, request);
  OFF(ucp_request_param_t, cb); OFF(ucp_request_param_t, datatype); OFF(ucp_request_param_t, user_data); OFF(ucp_request_param_t, memh);
  SZ(ucp_mem_attr_t); OFF(ucp_mem_attr_t, field_mask); OFF(ucp_mem_attr_t, address); OFF(ucp_mem_attr_t, length);
  SZ(ucp_am_handler_param_t); OFF(ucp_am_handler_param_t, field_mask); OFF(ucp_am_handler_param_t, id); OFF(ucp_am_handler_param_t, flags);
  OFF(ucp_am_handler_param_t, cb); OFF(ucp_am_handler_param_t, arg);
  SZ(ucp_am_recv_param_t); OFF(ucp_am_recv_param_t, recv_attr); OFF(ucp_am_recv_param_t, reply_ep);
  C(UCP_PARAM_FIELD_FEATURES); C(UCP_PARAM_FIELD_NAME); C(UCP_FEATURE_RMA); C(UCP_FEATURE_AM);
  C(UCP_WORKER_PARAM_FIELD_THREAD_MODE); C(UCS_THREAD_MODE_SINGLE); C(UCS_THREAD_MODE_SERIALIZED); C(UCS_THREAD_MODE_MULTI);
  C(UCP_MEM_MAP_PARAM_FIELD_ADDRESS); C(UCP_MEM_MAP_PARAM_FIELD_LENGTH); C(UCP_MEM_MAP_PARAM_FIELD_FLAGS); C(UCP_MEM_MAP_ALLOCATE);
  C(UCP_EP_PARAM_FIELD_REMOTE_ADDRESS); C(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE); C(UCP_EP_PARAM_FIELD_ERR_HANDLER); C(UCP_EP_PARAM_FIELD_USER_DATA);
  C(UCP_ERR_HANDLING_MODE_NONE); C(UCP_ERR_HANDLING_MODE_PEER); C(UCP_EP_CLOSE_FLAG_FORCE); C(UCP_EP_CLOSE_MODE_FORCE); C(UCP_EP_CLOSE_MODE_FLUSH);
  C(UCP_OP_ATTR_FIELD_REQUEST); C(UCP_OP_ATTR_FIELD_CALLBACK); C(UCP_OP_ATTR_FIELD_USER_DATA); C(UCP_OP_ATTR_FIELD_FLAGS); C(UCP_OP_ATTR_FIELD_MEMH);
  C(UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
  C(UCP_MEM_ATTR_FIELD_ADDRESS); C(UCP_MEM_ATTR_FIELD_LENGTH);
  C(UCP_AM_HANDLER_PARAM_FIELD_ID); C(UCP_AM_HANDLER_PARAM_FIELD_FLAGS); C(UCP_AM_HANDLER_PARAM_FIELD_CB); C(UCP_AM_HANDLER_PARAM_FIELD_ARG);
  C(UCP_AM_FLAG_WHOLE_MSG); C(UCP_AM_SEND_FLAG_REPLY); C(UCP_AM_SEND_FLAG_EAGER); C(UCP_AM_RECV_ATTR_FLAG_DATA); C(UCP_AM_RECV_ATTR_FIELD_REPLY_EP);
  C(UCP_AM_FLAG_PERSISTENT_DATA); C(UCP_OP_ATTR_FIELD_DATATYPE); C(UCP_DATATYPE_IOV); C(UCP_AM_RECV_ATTR_FLAG_RNDV);
  SZ(ucp_dt_iov_t); OFF(ucp_dt_iov_t, buffer); OFF(ucp_dt_iov_t, length);
  C(UCS_OK); C(UCS_INPROGRESS); C(UCS_ERR_NO_ELEM); C(UCS_ERR_UNREACHABLE); C(UCS_ERR_CONNECTION_RESET); C(UCS_ERR_CANCELED); C(UCS_ERR_ENDPOINT_TIMEOUT);
  C(UCS_ERR_INVALID_PARAM); C(UCS_ERR_UNSUPPORTED); C(UCS_ERR_LAST);
  C(UCP_API_MAJOR); C(UCP_API_MINOR);
  return 0;
}
