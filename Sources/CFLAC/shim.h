#ifndef PARTYCAST_CFLAC_SHIM_H
#define PARTYCAST_CFLAC_SHIM_H
#include <FLAC/stream_decoder.h>
#include <dlfcn.h>
#include <stddef.h>

/* The libFLAC functions PartyCast calls, resolved at their first use rather than at start-up:
   only a FLAC file maps libFLAC. */
#define PARTYCAST_FLAC_FUNCTIONS(F) \
    F(FLAC__stream_decoder_new) \
    F(FLAC__stream_decoder_delete) \
    F(FLAC__stream_decoder_set_metadata_respond) \
    F(FLAC__stream_decoder_set_md5_checking) \
    F(FLAC__stream_decoder_init_stream) \
    F(FLAC__stream_decoder_process_until_end_of_metadata) \
    F(FLAC__stream_decoder_get_state) \
    F(FLAC__stream_decoder_process_single) \
    F(FLAC__stream_decoder_seek_absolute) \
    F(FLAC__stream_decoder_flush) \
    F(FLAC__stream_decoder_get_resolved_state_string)

typedef struct {
#define PARTYCAST_FLAC_FIELD(name) __typeof__(name) *_Nonnull name;
    PARTYCAST_FLAC_FUNCTIONS(PARTYCAST_FLAC_FIELD)
#undef PARTYCAST_FLAC_FIELD
} PartyCastFLACFunctions;

/* Opens libFLAC.so.12 and fills `functions`: NULL, or dlerror()'s words. */
static inline const char *_Nullable partycast_flac_open(PartyCastFLACFunctions *_Nonnull functions) {
    void *library = dlopen("libFLAC.so.12", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return dlerror();
#define PARTYCAST_FLAC_RESOLVE(name) if ((*(void **)&functions->name = dlsym(library, #name)) == NULL) return dlerror();
    PARTYCAST_FLAC_FUNCTIONS(PARTYCAST_FLAC_RESOLVE)
#undef PARTYCAST_FLAC_RESOLVE
    return NULL;
}

#endif
