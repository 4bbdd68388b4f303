/* CLBlast's C API can override a kernel's parameters but not read them back; its C++ API can
 * (RetrieveParameters, CLBlast >= 1.5). blas.c reads CLBlast's own set for a device before
 * anything overrides it, so that the choice of parameter set by measurement (choose.c) can
 * go back to it: CLBlast keeps overrides per cl_device_id for the life of the process. */
#include <clblast.h>

#include <cstring>
#include <string>
#include <unordered_map>

extern "C" int ht_clblast_retrieve(cl_device_id dev, const char *kernel, int max,
                                   char (*names)[32], size_t *values) {
    std::unordered_map<std::string, size_t> m;
    try {
        if (clblast::RetrieveParameters(dev, kernel, clblast::Precision::kSingle, m) !=
            clblast::StatusCode::kSuccess)
            return -1;
    } catch (...) { /* nothing may cross into C */
        return -1;
    }
    int n = 0;
    for (const auto &kv : m) {
        if (n == max || kv.first.size() >= sizeof names[0]) return -1;
        std::strcpy(names[n], kv.first.c_str());
        values[n++] = kv.second;
    }
    return n;
}
