#ifndef PARTYCAST_LAZY_LIBRARY_H
#define PARTYCAST_LAZY_LIBRARY_H
/* Not a target: the one definition the shims of the C libraries PartyCast opens at first use
   (`lazySystemLibrary` in Package.swift) include, by path. Macros only, so each shim's module
   holds its own table type and loader and none holds another's. */
#include <dlfcn.h>
#include <stddef.h>

/* Declares TYPE, a table of the functions LIST names (LIST(F) is F(name) for each), and OPEN, which
   opens SONAME and fills a table: NULL, or dlerror()'s words. Swift calls it through loadCLibrary. */
#define PARTYCAST_LAZY_LIBRARY(TYPE, OPEN, SONAME, LIST) \
    typedef struct { LIST(PARTYCAST_LAZY_FIELD) } TYPE; \
    static inline const char *_Nullable OPEN(TYPE *_Nonnull functions) { \
        void *library = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL); \
        if (library == NULL) return dlerror(); \
        LIST(PARTYCAST_LAZY_RESOLVE) \
        return NULL; \
    }
#define PARTYCAST_LAZY_FIELD(name) __typeof__(name) *_Nonnull name;
#define PARTYCAST_LAZY_RESOLVE(name) if ((*(void **)&functions->name = dlsym(library, #name)) == NULL) return dlerror();
#endif
