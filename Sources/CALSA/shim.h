#ifndef PARTYCAST_CALSA_SHIM_H
#define PARTYCAST_CALSA_SHIM_H
#include <alsa/asoundlib.h>
#include "../CLazyLibrary/lazy_library.h"

/* The libasound functions PartyCast calls, resolved at their first use rather than at start-up:
   only the alsa output maps alsa-lib (a listener on the virtual card or a file never does). */
#define PARTYCAST_ALSA_FUNCTIONS(F) \
    F(snd_pcm_open) \
    F(snd_pcm_set_params) \
    F(snd_pcm_get_params) \
    F(snd_pcm_writei) \
    F(snd_pcm_recover) \
    F(snd_pcm_delay) \
    F(snd_pcm_avail_delay) \
    F(snd_pcm_wait) \
    F(snd_pcm_state) \
    F(snd_pcm_drain) \
    F(snd_pcm_close) \
    F(snd_strerror) \
    F(snd_lib_error_set_handler) \
    F(snd_device_name_hint) \
    F(snd_device_name_get_hint) \
    F(snd_device_name_free_hint) \
    F(snd_pcm_info_malloc) \
    F(snd_pcm_info) \
    F(snd_pcm_info_get_card) \
    F(snd_pcm_info_free) \
    F(snd_mixer_open) \
    F(snd_mixer_attach) \
    F(snd_mixer_selem_register) \
    F(snd_mixer_load) \
    F(snd_mixer_close) \
    F(snd_mixer_first_elem) \
    F(snd_mixer_elem_next) \
    F(snd_mixer_selem_get_name) \
    F(snd_mixer_selem_get_index) \
    F(snd_mixer_selem_is_active) \
    F(snd_mixer_selem_has_playback_volume) \
    F(snd_mixer_selem_has_playback_switch) \
    F(snd_mixer_selem_get_playback_volume_range) \
    F(snd_mixer_selem_get_playback_dB_range) \
    F(snd_mixer_selem_set_playback_volume_all) \
    F(snd_mixer_selem_set_playback_dB_all) \
    F(snd_mixer_selem_set_playback_switch_all)

PARTYCAST_LAZY_LIBRARY(PartyCastALSAFunctions, partycast_alsa_open, "libasound.so.2", PARTYCAST_ALSA_FUNCTIONS)

// alsa-lib prints its own diagnostics to stderr; PartyCast reports ALSA errors itself, in one line.
// The handler type is variadic, which Swift cannot implement, hence this C wrapper.
static void partycast_alsa_ignore_error(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
static inline void partycast_alsa_silence_library_messages(const PartyCastALSAFunctions *_Nonnull alsa) {
    alsa->snd_lib_error_set_handler(partycast_alsa_ignore_error);
}
#endif
