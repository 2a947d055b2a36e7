#ifndef PARTYCAST_CALSA_SHIM_H
#define PARTYCAST_CALSA_SHIM_H
#include <alsa/asoundlib.h>
#endif
