#ifndef PARTYCAST_CFAAD2_SHIM_H
#define PARTYCAST_CFAAD2_SHIM_H
#include <neaacdec.h>
#include <dlfcn.h>
#include <stddef.h>

/* The libfaad functions PartyCast calls, resolved at their first use rather than at start-up:
   only an AAC stream maps libfaad. */
#define PARTYCAST_FAAD_FUNCTIONS(F) \
    F(NeAACDecOpen) \
    F(NeAACDecClose) \
    F(NeAACDecDecode) \
    F(NeAACDecGetCurrentConfiguration) \
    F(NeAACDecSetConfiguration) \
    F(NeAACDecInit)

typedef struct {
#define PARTYCAST_FAAD_FIELD(name) __typeof__(name) *_Nonnull name;
    PARTYCAST_FAAD_FUNCTIONS(PARTYCAST_FAAD_FIELD)
#undef PARTYCAST_FAAD_FIELD
} PartyCastFAADFunctions;

/* Opens libfaad.so.2 and fills `functions`: NULL, or dlerror()'s words. */
static inline const char *_Nullable partycast_faad_open(PartyCastFAADFunctions *_Nonnull functions) {
    void *library = dlopen("libfaad.so.2", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return dlerror();
#define PARTYCAST_FAAD_RESOLVE(name) if ((*(void **)&functions->name = dlsym(library, #name)) == NULL) return dlerror();
    PARTYCAST_FAAD_FUNCTIONS(PARTYCAST_FAAD_RESOLVE)
#undef PARTYCAST_FAAD_RESOLVE
    return NULL;
}

#endif
