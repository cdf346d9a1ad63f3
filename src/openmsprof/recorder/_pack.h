/* Packed record blocks: the native flusher's encoding of its 32-byte records (raw format
 * version 2; docs/formats.md "Packed record slices", read by recorder/packed_read.py).
 *
 * A block is an 8-byte header (u32 record count, u32 payload bytes, little-endian) and a payload
 * of eight LEB128 varints a record:
 *
 *     kind, flags, aux                      as they are
 *     tid, a, b                             zigzag of the int32 difference from the block's
 *                                           previous record (0 before the first)
 *     t0                                    zigzag of the int64 difference from the previous t0
 *     t1                                    zigzag of the int64 difference t1 - t0
 *
 * Differences wrap (mod 2^32 or 2^64), so any 32 bytes round-trip, counter and task-info
 * layouts included.  A marker is ~8-9 bytes instead of 32: the flusher of a thread marking flat
 * out writes ~150 MB/s instead of ~560, which a disk that throttles at ~400 MB/s keeps up with.
 * Every block starts afresh, so a reader may drop a torn or damaged one and go on.
 */
#ifndef OPENMSPROF_PACK_H
#define OPENMSPROF_PACK_H

#include <stddef.h>
#include <stdint.h>

#define PACK_BLOCK_RECORDS 4096u
#define PACK_BLOCK_HEADER 8u
#define PACK_MAX_RECORD 80u /* eight varints of at most 10 bytes */
#define PACK_BLOCK_MAX ((size_t)PACK_BLOCK_HEADER + (size_t)PACK_BLOCK_RECORDS * PACK_MAX_RECORD)

static inline uint8_t *pack_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t pack_zz64(uint64_t d) { return (d << 1) ^ (uint64_t)(-(int64_t)(d >> 63)); }

static inline uint64_t pack_zz32(uint32_t d) { return (uint64_t)((d << 1) ^ (uint32_t)(-(int32_t)(d >> 31))); }

static inline void pack_u32le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* One block of the ``n`` (1..PACK_BLOCK_RECORDS) records at ``src`` (32 bytes each, the rec_t
 * layout) into ``out`` (PACK_BLOCK_MAX bytes at least); returns the block's size. */
static size_t pack_block(const unsigned char *src, size_t n, uint8_t *out) {
    uint8_t *p = out + PACK_BLOCK_HEADER;
    uint32_t ptid = 0, pa = 0, pb = 0;
    uint64_t pt0 = 0;
    for (size_t i = 0; i < n; i++, src += 32) {
        uint16_t aux;
        uint32_t tid, a, b;
        uint64_t t0, t1;
        memcpy(&aux, src + 2, 2); memcpy(&tid, src + 4, 4);
        memcpy(&t0, src + 8, 8); memcpy(&t1, src + 16, 8);
        memcpy(&a, src + 24, 4); memcpy(&b, src + 28, 4);
        p = pack_varint(p, src[0]);
        p = pack_varint(p, src[1]);
        p = pack_varint(p, aux);
        p = pack_varint(p, pack_zz32(tid - ptid));
        p = pack_varint(p, pack_zz64(t0 - pt0));
        p = pack_varint(p, pack_zz64(t1 - t0));
        p = pack_varint(p, pack_zz32(a - pa));
        p = pack_varint(p, pack_zz32(b - pb));
        ptid = tid; pt0 = t0; pa = a; pb = b;
    }
    size_t payload = (size_t)(p - out) - PACK_BLOCK_HEADER;
    pack_u32le(out, (uint32_t)n);
    pack_u32le(out + 4, (uint32_t)payload);
    return (size_t)(p - out);
}

/* ---- decoding (recorder/packed_read.py holds the numpy fallback, with the same checks) ---- */
#define UNPACK_MAX_BLOCK_RECORDS 65536u

static inline uint32_t unpack_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A block header that no encoder writes (the reader cannot frame what follows). */
static inline int unpack_header_bad(uint32_t n, uint32_t plen) {
    return n == 0 || n > UNPACK_MAX_BLOCK_RECORDS || (uint64_t)plen < (uint64_t)n * 8u ||
           (uint64_t)plen > (uint64_t)n * PACK_MAX_RECORD;
}

/* The ``n`` records of one block's payload ``p`` (``plen`` bytes) into ``out`` (n * 32 bytes);
 * 0 when the payload is not exactly 8n varints of at most 10 bytes with every field in range
 * (``out`` is then partly written and to be ignored). */
static int unpack_block(const uint8_t *p, size_t plen, uint32_t n, unsigned char *out) {
    const uint8_t *end = p + plen;
    uint32_t tid = 0, a = 0, b = 0;
    uint64_t t0 = 0;
    for (uint32_t i = 0; i < n; i++, out += 32) {
        uint64_t v[8];
        for (int f = 0; f < 8; f++) {
            uint64_t x = 0;
            int k = 0;
            for (;;) {
                if (p == end || k == 10) return 0;
                uint8_t c = *p++;
                x |= (uint64_t)(c & 0x7F) << (7 * k);
                k++;
                if (c < 0x80) break;
            }
            v[f] = x;
        }
        if (v[0] > 0xFF || v[1] > 0xFF || v[2] > 0xFFFF || v[3] > 0xFFFFFFFFu || v[6] > 0xFFFFFFFFu ||
            v[7] > 0xFFFFFFFFu)
            return 0;
#define UNZZ(z) (((z) >> 1) ^ ((uint64_t)0 - ((z) & 1)))
        tid += (uint32_t)UNZZ(v[3]);
        t0 += UNZZ(v[4]);
        uint64_t t1 = t0 + UNZZ(v[5]);
        a += (uint32_t)UNZZ(v[6]);
        b += (uint32_t)UNZZ(v[7]);
#undef UNZZ
        uint16_t aux = (uint16_t)v[2];
        out[0] = (unsigned char)v[0];
        out[1] = (unsigned char)v[1];
        memcpy(out + 2, &aux, 2); memcpy(out + 4, &tid, 4);
        memcpy(out + 8, &t0, 8); memcpy(out + 16, &t1, 8);
        memcpy(out + 24, &a, 4); memcpy(out + 28, &b, 4);
    }
    return p == end;
}

#endif
