#ifndef PARTYCAST_CSODIUM_SHIM_H
#define PARTYCAST_CSODIUM_SHIM_H
#include <sodium.h>
#endif
