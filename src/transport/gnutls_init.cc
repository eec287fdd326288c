#include "transport/gnutls_init.h"

#include <gnutls/gnutls.h>

namespace felix::transport {

void EnsureGnutlsInitialized() {
  // Function-local static: thread-safe one-time init (GnuTLS' library constructor already runs
  // gnutls_global_init; this keeps a reference so nothing can deinitialise it under us).
  static const int once = gnutls_global_init();
  (void)once;
}

}  // namespace felix::transport
