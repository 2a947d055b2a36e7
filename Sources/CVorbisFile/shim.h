#ifndef PARTYCAST_CVORBISFILE_SHIM_H
#define PARTYCAST_CVORBISFILE_SHIM_H
// The header's static stdio callback tables would be unused copies in every importer.
#define OV_EXCLUDE_STATIC_CALLBACKS
#include <vorbis/vorbisfile.h>
#include <dlfcn.h>
#include <stddef.h>

/* The libvorbisfile functions PartyCast calls, resolved at their first use rather than at start-up:
   only an Ogg Vorbis stream maps libvorbisfile, libvorbis and libogg. */
#define PARTYCAST_VORBISFILE_FUNCTIONS(F) \
    F(ov_clear) \
    F(ov_open_callbacks) \
    F(ov_info) \
    F(ov_seekable) \
    F(ov_pcm_total) \
    F(ov_comment) \
    F(ov_read_float) \
    F(ov_pcm_seek)

typedef struct {
#define PARTYCAST_VORBISFILE_FIELD(name) __typeof__(name) *_Nonnull name;
    PARTYCAST_VORBISFILE_FUNCTIONS(PARTYCAST_VORBISFILE_FIELD)
#undef PARTYCAST_VORBISFILE_FIELD
} PartyCastVorbisFileFunctions;

/* Opens libvorbisfile.so.3 and fills `functions`: NULL, or dlerror()'s words. */
static inline const char *_Nullable partycast_vorbisfile_open(PartyCastVorbisFileFunctions *_Nonnull functions) {
    void *library = dlopen("libvorbisfile.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return dlerror();
#define PARTYCAST_VORBISFILE_RESOLVE(name) if ((*(void **)&functions->name = dlsym(library, #name)) == NULL) return dlerror();
    PARTYCAST_VORBISFILE_FUNCTIONS(PARTYCAST_VORBISFILE_RESOLVE)
#undef PARTYCAST_VORBISFILE_RESOLVE
    return NULL;
}

#endif
