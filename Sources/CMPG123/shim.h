#ifndef PARTYCAST_CMPG123_SHIM_H
#define PARTYCAST_CMPG123_SHIM_H
#include <sys/types.h>
#include <mpg123.h>
// mpg123.h renames some functions with macros for large-file builds; Swift cannot see macros,
// so this wrapper lets the C compiler pick the right symbol.
static inline int partycast_mpg123_decode_frame(mpg123_handle *mh, off_t *num, unsigned char **audio, size_t *bytes) {
    return mpg123_decode_frame(mh, num, audio, bytes);
}
#endif
