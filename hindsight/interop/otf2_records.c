/* The OTF2 event callbacks of hindsight's OTF2 import (hindsight/interop/otf2_events.py): each
 * appends one fixed-size int64 record to the buffer its state array names. The record layout,
 * the state array's slots and the kinds are otf2_events' constants, given by the compile
 * command (otf2_events.RECORD_DEFINES); the OTF2 attribute list functions are called through
 * the addresses in the state array, so this file needs no OTF2 header and links nothing.
 *
 * OTF2 calls a callback with (location, time, userData, attributeList, the event's fields...);
 * userData is the state array. A callback returns OTF2_CALLBACK_SUCCESS (0), or
 * OTF2_CALLBACK_INTERRUPT (1) on a full buffer, which does not happen: the reader asks for at
 * most the buffer's capacity of events. */

#include <stdint.h>

#if !defined(WIDTH) || !defined(A0) || !defined(NATTRS) || !defined(S_REFS) || !defined(S_N)
#error "compile with otf2_events.RECORD_DEFINES"
#endif

typedef uint32_t (*count_fn)(const void *list);
typedef int32_t (*get_fn)(const void *list, uint32_t index, uint32_t *ref, uint8_t *type,
                          uint64_t *value);

/* an OTF2_AttributeValue's integer as the otf2 package gives it (a string's ref) */
static int64_t decode(uint8_t type, uint64_t raw) {
    switch (type) {
    case 1: return (int64_t)(uint8_t)raw;           /* OTF2_TYPE_UINT8 */
    case 2: return (int64_t)(uint16_t)raw;          /* UINT16 */
    case 3: case 11: return (int64_t)(uint32_t)raw; /* UINT32, STRING (a ref) */
    case 5: return (int64_t)(int8_t)raw;            /* INT8 */
    case 6: return (int64_t)(int16_t)raw;           /* INT16 */
    case 7: return (int64_t)(int32_t)raw;           /* INT32 */
    default: return (int64_t)raw;
    }
}

static int32_t append(int64_t *s, int64_t kind, uint64_t loc, uint64_t time, int64_t f0,
                      int64_t f1, int64_t f2, int64_t f3, int64_t f4, int64_t f5,
                      const void *attrs) {
    int64_t n = s[S_N];
    if (n >= s[S_CAP]) return 1;
    int64_t *b = (int64_t *)(intptr_t)s[S_BUF] + n * WIDTH;
    b[KIND] = kind;
    b[LOC] = (int64_t)loc;
    b[TIME] = (int64_t)time;
    b[F0] = f0; b[F1] = f1; b[F2] = f2; b[F3] = f3; b[F4] = f4; b[F5] = f5;
    int64_t mask = 0;
    if (attrs) {
        uint32_t count = ((count_fn)(intptr_t)s[S_NATTR])(attrs);
        get_fn get = (get_fn)(intptr_t)s[S_GETATTR];
        for (uint32_t i = 0; i < count; i++) {
            uint32_t ref = 0;
            uint8_t type = 0;
            uint64_t value = 0;
            get(attrs, i, &ref, &type, &value);
            for (int j = 0; j < NATTRS; j++)
                if (s[S_REFS + j] == (int64_t)ref) {
                    b[A0 + j] = decode(type, value);
                    mask |= (int64_t)1 << j;
                }
        }
    }
    b[MASK] = mask;
    s[S_N] = n + 1;
    return 0;
}

#define HEAD uint64_t loc, uint64_t t, int64_t *s, const void *a

int32_t hs_enter(HEAD, uint32_t region) {
    return append(s, K_ENTER, loc, t, region, 0, 0, 0, 0, 0, a);
}
int32_t hs_leave(HEAD, uint32_t region) {
    return append(s, K_LEAVE, loc, t, region, 0, 0, 0, 0, 0, a);
}
int32_t hs_send(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len) {
    return append(s, K_SEND, loc, t, peer, comm, tag, (int64_t)len, 0, 0, a);
}
int32_t hs_isend(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len, uint64_t req) {
    return append(s, K_ISEND, loc, t, peer, comm, tag, (int64_t)len, (int64_t)req, 0, a);
}
int32_t hs_recv(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len) {
    return append(s, K_RECV, loc, t, peer, comm, tag, (int64_t)len, 0, 0, a);
}
int32_t hs_irecv(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len, uint64_t req) {
    return append(s, K_IRECV, loc, t, peer, comm, tag, (int64_t)len, (int64_t)req, 0, a);
}
int32_t hs_isend_complete(HEAD, uint64_t req) {
    return append(s, K_ISEND_COMPLETE, loc, t, 0, 0, 0, 0, (int64_t)req, 0, a);
}
int32_t hs_irecv_request(HEAD, uint64_t req) {
    return append(s, K_IRECV_REQUEST, loc, t, 0, 0, 0, 0, (int64_t)req, 0, a);
}
int32_t hs_request_test(HEAD, uint64_t req) {
    return append(s, K_REQUEST_TEST, loc, t, 0, 0, 0, 0, (int64_t)req, 0, a);
}
int32_t hs_nbc_request(HEAD, uint64_t req) {
    return append(s, K_NBC_REQUEST, loc, t, 0, 0, 0, 0, (int64_t)req, 0, a);
}
int32_t hs_coll_begin(HEAD) {
    return append(s, K_COLL_BEGIN, loc, t, 0, 0, 0, 0, 0, 0, a);
}
int32_t hs_coll_end(HEAD, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent,
                    uint64_t received) {
    return append(s, K_COLL_END, loc, t, op, comm, root, (int64_t)sent, 0, (int64_t)received, a);
}
int32_t hs_nbc_complete(HEAD, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent,
                        uint64_t received, uint64_t req) {
    return append(s, K_NBC_COMPLETE, loc, t, op, comm, root, (int64_t)sent, (int64_t)req,
                  (int64_t)received, a);
}
int32_t hs_probe(HEAD, uint32_t sender, uint32_t comm, uint32_t tag, uint64_t msg) {
    return append(s, K_PROBE, loc, t, sender, comm, tag, (int64_t)msg, 0, 0, a);
}
