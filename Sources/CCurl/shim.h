#ifndef PARTYCAST_CCURL_SHIM_H
#define PARTYCAST_CCURL_SHIM_H
/* The wrappers below call curl_easy_setopt through a pointer; curl's type-checking macro of the same
   name would expand there. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include "../CLazyLibrary/lazy_library.h"

/* The libcurl functions PartyCast calls, resolved at their first use: only an http(s):// source maps
   libcurl (and the TLS library under it). */
#define PARTYCAST_CURL_FUNCTIONS(F) \
    F(curl_global_init) \
    F(curl_easy_init) \
    F(curl_easy_cleanup) \
    F(curl_easy_perform) \
    F(curl_easy_strerror) \
    F(curl_slist_append) \
    F(curl_slist_free_all) \
    F(curl_easy_nextheader)

PARTYCAST_LAZY_LIBRARY(PartyCastCurlFunctions, partycast_curl_open_functions, "libcurl.so.4", PARTYCAST_CURL_FUNCTIONS)

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: they are kept as
   plain addresses and called, with the right variadic type, by the typed wrappers below. */
typedef struct {
    PartyCastCurlFunctions functions;
    void *_Nonnull setopt;
    void *_Nonnull getinfo;
} PartyCastCurl;

static inline const char *_Nullable partycast_curl_open(PartyCastCurl *_Nonnull curl) {
    const char *failure = partycast_curl_open_functions(&curl->functions);
    if (failure != NULL) return failure;
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return dlerror();
    if ((curl->setopt = dlsym(library, "curl_easy_setopt")) == NULL) return dlerror();
    if ((curl->getinfo = dlsym(library, "curl_easy_getinfo")) == NULL) return dlerror();
    return NULL;
}

typedef CURLcode (*partycast_curl_setopt_t)(CURL *, CURLoption, ...);
typedef CURLcode (*partycast_curl_getinfo_t)(CURL *, CURLINFO, ...);

static inline CURLcode partycast_curl_set_long(void *_Nonnull setopt, CURL *_Nonnull handle, CURLoption option, long value) {
    return ((partycast_curl_setopt_t)setopt)(handle, option, value);
}

/* For options whose value curl copies (strings) or keeps (lists, buffers, user data). */
static inline CURLcode partycast_curl_set_pointer(void *_Nonnull setopt, CURL *_Nonnull handle, CURLoption option, const void *_Nullable value) {
    return ((partycast_curl_setopt_t)setopt)(handle, option, value);
}

/* The write and header callbacks share curl_write_callback's type. */
static inline CURLcode partycast_curl_set_data_callback(void *_Nonnull setopt, CURL *_Nonnull handle, CURLoption option, curl_write_callback _Nonnull value) {
    return ((partycast_curl_setopt_t)setopt)(handle, option, value);
}

static inline CURLcode partycast_curl_set_progress_callback(void *_Nonnull setopt, CURL *_Nonnull handle, curl_xferinfo_callback _Nonnull value) {
    return ((partycast_curl_setopt_t)setopt)(handle, CURLOPT_XFERINFOFUNCTION, value);
}

static inline CURLcode partycast_curl_set_connected_callback(void *_Nonnull setopt, CURL *_Nonnull handle, curl_prereq_callback _Nonnull value) {
    return ((partycast_curl_setopt_t)setopt)(handle, CURLOPT_PREREQFUNCTION, value);
}

static inline CURLcode partycast_curl_get_long(void *_Nonnull getinfo, CURL *_Nonnull handle, CURLINFO info, long *_Nonnull value) {
    return ((partycast_curl_getinfo_t)getinfo)(handle, info, value);
}

#endif
