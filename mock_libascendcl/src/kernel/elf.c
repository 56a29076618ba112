/*
 * elf.c - a small, defensive ELF reader for kernel binaries: the header, the section
 * headers (with extended numbering) and the defined symbols of .symtab / .dynsym.
 *
 * Input is untrusted (a file or a buffer the program passes): every offset, size and
 * count is checked against the buffer with overflow-safe arithmetic before it is
 * read, fields are read byte by byte in the file's byte order (ELF32 and ELF64, little
 * and big endian), and every name must be NUL-terminated inside its string table. A
 * truncated or malformed file gives an error message, never a read outside the buffer.
 * Nothing is copied: names point into the buffer, which must outlive the result.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernel/kernel_private.h"

/* Upper bounds that no real kernel binary reaches; they keep the work (and the
 * allocation for the symbol array) proportional to the input. */
#define ELF_MAX_SECTIONS 65536u
#define ELF_MAX_SYMBOLS (1u << 22)
#define ELF_MAX_NOBITS (1ull << 30)

typedef struct rd {
    const uint8_t *p;
    size_t size;
    bool le;
    bool is64;
} rd;

static bool in_bounds(const rd *r, uint64_t off, uint64_t len)
{
    return off <= r->size && len <= r->size - off;
}

static uint64_t get(const rd *r, uint64_t off, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned shift = r->le ? 8 * i : 8 * (n - 1 - i);
        v |= (uint64_t)r->p[off + i] << shift;
    }
    return v;
}

/* Field offsets/sizes of the ELF32 and ELF64 layouts. */
#define W(r, a32, a64) ((r)->is64 ? (a64) : (a32))
#define ADDR(r) W(r, 4u, 8u)

static bool fail(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return false;
}

static bool read_sections(const rd *r, uint64_t shoff, uint64_t shentsize, uint64_t shnum, kernel_elf *out,
                          char *err, size_t errlen)
{
    out->sections = calloc(shnum, sizeof *out->sections);
    if (out->sections == NULL) {
        return fail(err, errlen, "out of host memory");
    }
    out->nsections = (size_t)shnum;
    for (uint64_t i = 0; i < shnum; i++) {
        uint64_t o = shoff + i * shentsize;
        kernel_elf_section *s = &out->sections[i];
        s->name_off = (uint32_t)get(r, o + 0, 4);
        s->type = (uint32_t)get(r, o + 4, 4);
        s->addr = get(r, o + W(r, 12u, 16u), ADDR(r));
        s->offset = get(r, o + W(r, 16u, 24u), ADDR(r));
        s->size = get(r, o + W(r, 20u, 32u), ADDR(r));
        s->link = (uint32_t)get(r, o + W(r, 24u, 40u), 4);
        s->align = get(r, o + W(r, 32u, 48u), ADDR(r));
        s->entsize = get(r, o + W(r, 36u, 56u), ADDR(r));
        if (s->type != SHT_NOBITS && s->type != SHT_NULL && !in_bounds(r, s->offset, s->size)) {
            snprintf(err, errlen, "section %llu (offset %llu, %llu bytes) lies outside the %zu-byte file",
                     (unsigned long long)i, (unsigned long long)s->offset, (unsigned long long)s->size, r->size);
            return false;
        }
    }
    return true;
}

/* The NUL-terminated string at `off` of string-table section `strtab`, or NULL. */
static const char *str_at(const rd *r, const kernel_elf_section *strtab, uint64_t off)
{
    if (strtab->type != SHT_STRTAB || off >= strtab->size) {
        return NULL;
    }
    const char *s = (const char *)r->p + strtab->offset + off;
    return memchr(s, '\0', (size_t)(strtab->size - off)) != NULL ? s : NULL;
}

static bool read_symbols(const rd *r, kernel_elf *out, char *err, size_t errlen)
{
    uint64_t esz = W(r, 16u, 24u);
    uint64_t total = 0;
    for (size_t i = 0; i < out->nsections; i++) {
        const kernel_elf_section *s = &out->sections[i];
        if (s->type != SHT_SYMTAB && s->type != SHT_DYNSYM) {
            continue;
        }
        if (s->entsize < esz || s->link >= out->nsections) {
            snprintf(err, errlen, "symbol table section %zu has a bad entry size or string table link", i);
            return false;
        }
        total += s->size / s->entsize;
    }
    if (total > ELF_MAX_SYMBOLS) {
        return fail(err, errlen, "too many symbols");
    }
    out->syms = calloc(total ? total : 1, sizeof *out->syms);
    if (out->syms == NULL) {
        return fail(err, errlen, "out of host memory");
    }
    for (size_t i = 0; i < out->nsections; i++) {
        const kernel_elf_section *s = &out->sections[i];
        if (s->type != SHT_SYMTAB && s->type != SHT_DYNSYM) {
            continue;
        }
        const kernel_elf_section *strtab = &out->sections[s->link];
        uint64_t n = s->size / s->entsize;
        for (uint64_t k = 1; k < n; k++) { /* entry 0 is the null symbol */
            uint64_t o = s->offset + k * s->entsize;
            uint32_t name = (uint32_t)get(r, o, 4);
            uint8_t info = r->is64 ? (uint8_t)get(r, o + 4, 1) : (uint8_t)get(r, o + 12, 1);
            uint16_t shndx = r->is64 ? (uint16_t)get(r, o + 6, 2) : (uint16_t)get(r, o + 14, 2);
            uint64_t value = r->is64 ? get(r, o + 8, 8) : get(r, o + 4, 4);
            uint64_t size = r->is64 ? get(r, o + 16, 8) : get(r, o + 8, 4);
            if (shndx == SHN_UNDEF || name == 0) {
                continue; /* imports and unnamed symbols are not the binary's own */
            }
            const char *nm = str_at(r, strtab, name);
            if (nm == NULL) {
                snprintf(err, errlen, "symbol %llu of section %zu has a name outside its string table",
                         (unsigned long long)k, i);
                return false;
            }
            uint8_t type = (uint8_t)(info & 0xf);
            if (type == STT_SECTION || type == STT_FILE) {
                continue;
            }
            kernel_elf_sym *y = &out->syms[out->nsyms++];
            y->name = nm;
            y->value = value;
            y->size = size;
            y->shndx = shndx;
            y->type = type;
            y->bind = (uint8_t)(info >> 4);
        }
    }
    return true;
}

bool kernel_elf_parse(const void *data, size_t size, kernel_elf *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    rd r = {(const uint8_t *)data, size, true, true};
    if (data == NULL || size < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0) {
        return fail(err, errlen, "not an ELF file (no \\x7fELF magic)");
    }
    uint8_t cls = r.p[EI_CLASS], enc = r.p[EI_DATA];
    if ((cls != ELFCLASS32 && cls != ELFCLASS64) || (enc != ELFDATA2LSB && enc != ELFDATA2MSB) ||
        r.p[EI_VERSION] != EV_CURRENT) {
        return fail(err, errlen, "unknown ELF class, byte order or version");
    }
    r.is64 = cls == ELFCLASS64;
    r.le = enc == ELFDATA2LSB;
    uint64_t ehsize = W(&r, 52u, 64u);
    if (size < ehsize) {
        return fail(err, errlen, "truncated ELF header");
    }
    out->data = r.p;
    out->size = size;
    out->is64 = r.is64;
    out->little_endian = r.le;
    out->type = (uint16_t)get(&r, 16, 2);
    out->machine = (uint16_t)get(&r, 18, 2);
    uint64_t shoff = get(&r, W(&r, 32u, 40u), ADDR(&r));
    uint64_t shentsize = get(&r, W(&r, 46u, 58u), 2);
    uint64_t shnum = get(&r, W(&r, 48u, 60u), 2);
    uint64_t shstrndx = get(&r, W(&r, 50u, 62u), 2);
    if (shoff == 0) {
        return fail(err, errlen, "the ELF file has no section headers (no symbol table)");
    }
    uint64_t need = W(&r, 40u, 64u);
    if (shentsize < need) {
        return fail(err, errlen, "bad section header entry size");
    }
    if (!in_bounds(&r, shoff, shentsize)) {
        return fail(err, errlen, "the section header table lies outside the file (truncated?)");
    }
    if (shnum == 0 || shstrndx == SHN_XINDEX) {
        /* extended numbering: the real values are in section header 0 */
        if (shnum == 0) {
            shnum = get(&r, shoff + W(&r, 20u, 32u), ADDR(&r));
        }
        if (shstrndx == SHN_XINDEX) {
            shstrndx = get(&r, shoff + W(&r, 24u, 40u), 4);
        }
    }
    if (shnum == 0 || shnum > ELF_MAX_SECTIONS) {
        return fail(err, errlen, "bad number of sections");
    }
    if (shnum > (UINT64_MAX - shoff) / shentsize || !in_bounds(&r, shoff, shnum * shentsize)) {
        return fail(err, errlen, "the section header table lies outside the file (truncated?)");
    }
    if (!read_sections(&r, shoff, shentsize, shnum, out, err, errlen)) {
        kernel_elf_free(out);
        return false;
    }
    /* where the zero-filled (NOBITS: .bss) sections go in a device copy: after the
     * file image, each aligned */
    uint64_t nobits = 0;
    for (size_t i = 0; i < out->nsections; i++) {
        kernel_elf_section *s = &out->sections[i];
        if (s->type != SHT_NOBITS) {
            continue;
        }
        uint64_t a = (s->align != 0 && (s->align & (s->align - 1)) == 0 && s->align <= 4096) ? s->align : 8;
        nobits = (nobits + a - 1) & ~(a - 1);
        s->nobits_off = nobits;
        if (s->size > ELF_MAX_NOBITS - nobits) {
            kernel_elf_free(out);
            return fail(err, errlen, "the zero-filled sections are larger than 1 GiB");
        }
        nobits += s->size;
    }
    out->nobits_size = nobits;
    out->shstrndx = shstrndx < shnum ? (size_t)shstrndx : SIZE_MAX;
    for (size_t i = 0; i < out->nsections && out->shstrndx != SIZE_MAX; i++) {
        out->sections[i].name = str_at(&r, &out->sections[out->shstrndx], out->sections[i].name_off);
    }
    if (!read_symbols(&r, out, err, errlen)) {
        kernel_elf_free(out);
        return false;
    }
    return true;
}

void kernel_elf_free(kernel_elf *e)
{
    free(e->sections);
    free(e->syms);
    e->sections = NULL;
    e->syms = NULL;
    e->nsections = e->nsyms = 0;
}

bool kernel_elf_is_host(const kernel_elf *e)
{
#if defined(__x86_64__)
    const uint16_t machine = EM_X86_64;
#elif defined(__aarch64__)
    const uint16_t machine = EM_AARCH64;
#elif defined(__i386__)
    const uint16_t machine = EM_386;
#else
    const uint16_t machine = 0xFFFF; /* unknown host: no ELF is a host object */
#endif
    bool le = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    return e->machine == machine && e->is64 == (sizeof(void *) == 8) && e->little_endian == le;
}

const kernel_elf_section *kernel_elf_section_named(const kernel_elf *e, const char *name)
{
    for (size_t i = 0; i < e->nsections; i++) {
        if (e->sections[i].name != NULL && strcmp(e->sections[i].name, name) == 0) {
            return &e->sections[i];
        }
    }
    return NULL;
}

const kernel_elf_sym *kernel_elf_symbol(const kernel_elf *e, const char *name, bool functions_only)
{
    const kernel_elf_sym *best = NULL;
    for (size_t i = 0; i < e->nsyms; i++) {
        const kernel_elf_sym *y = &e->syms[i];
        if (strcmp(y->name, name) != 0) {
            continue;
        }
        if (functions_only && y->type != STT_FUNC && y->type != STT_NOTYPE) {
            continue;
        }
        if (best == NULL || (best->bind == STB_LOCAL && y->bind != STB_LOCAL)) {
            best = y; /* prefer a global definition over a local one */
        }
    }
    return best;
}

bool kernel_elf_symbol_offset(const kernel_elf *e, const kernel_elf_sym *y, uint64_t nobits_base, uint64_t *off)
{
    if (y->shndx == SHN_ABS || y->shndx >= e->nsections || y->shndx >= SHN_LORESERVE) {
        return false;
    }
    const kernel_elf_section *s = &e->sections[y->shndx];
    /* linked objects give virtual addresses, relocatable ones section offsets */
    uint64_t rel = (e->type == ET_REL) ? y->value : y->value - s->addr;
    if (e->type != ET_REL && y->value < s->addr) {
        return false;
    }
    if (rel > s->size) {
        return false;
    }
    uint64_t base = s->type == SHT_NOBITS ? nobits_base + s->nobits_off : s->offset;
    *off = base + rel;
    return true;
}
