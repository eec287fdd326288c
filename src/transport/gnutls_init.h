// Process-wide GnuTLS initialisation. GnuTLS keeps library-global state (its RNG, the cipher
// tables); we initialise it exactly once through a function-local static, which is the one
// piece of global state this subsystem has. Call before any other GnuTLS function.
#pragma once

namespace felix::transport {

void EnsureGnutlsInitialized();

}  // namespace felix::transport
