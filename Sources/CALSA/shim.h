#ifndef PARTYCAST_CALSA_SHIM_H
#define PARTYCAST_CALSA_SHIM_H
#include <alsa/asoundlib.h>
// alsa-lib prints its own diagnostics to stderr; PartyCast reports ALSA errors itself, in one line.
// The handler type is variadic, which Swift cannot implement, hence this C wrapper.
static void partycast_alsa_ignore_error(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
static inline void partycast_alsa_silence_library_messages(void) {
    snd_lib_error_set_handler(partycast_alsa_ignore_error);
}
#endif
