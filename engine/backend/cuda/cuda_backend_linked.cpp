// cuda_backend_factory() where the CUDA backend is linked in (lmx_engine).
#include "engine/backend/cuda/cuda_backend_factory.h"

namespace lmx {

CudaBackendFactory cuda_backend_factory() { return &make_cuda_backend; }

}  // namespace lmx
