#ifndef PARTYCAST_CQRENCODE_SHIM_H
#define PARTYCAST_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
