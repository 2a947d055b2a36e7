#ifndef PARTYCAST_CLIBCRYPTO_SHIM_H
#define PARTYCAST_CLIBCRYPTO_SHIM_H
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#endif
