/* Names resolved to chosen addresses, for a test's processes only: an /etc/hosts of their own.

   Loaded with LD_PRELOAD into a crawl the test starts (the CLI, its workers, their children),
   this getaddrinfo answers each name listed in FAKE_HOSTS ("name=address,name=address") with
   its address, and hands every other call to the C library. Every resolver of the crawl goes
   through it alike: Python's socket module, asyncio's and uvloop's loops, aiohttp's resolver.
   A name can so stand for a site on "the Internet" and resolve to a loopback address where a
   test server listens, the way a hostile site's own DNS would answer.

   Build: cc -shared -fPIC -o fake_hosts.so fake_hosts.c -ldl */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

/* The address FAKE_HOSTS gives `node` (case-insensitive, a trailing dot ignored), copied into
   `out`; 0 when it names none. */
static int listed(const char *node, char *out, size_t size) {
    const char *map = getenv("FAKE_HOSTS");
    size_t len = strlen(node);
    if (map == NULL || len == 0) return 0;
    if (node[len - 1] == '.') len--;
    while (*map) {
        const char *end = strchr(map, ',');
        size_t entry = end ? (size_t)(end - map) : strlen(map);
        const char *eq = memchr(map, '=', entry);
        if (eq != NULL && (size_t)(eq - map) == len && strncasecmp(map, node, len) == 0) {
            size_t n = entry - (size_t)(eq - map) - 1;
            if (n >= size) return 0;
            memcpy(out, eq + 1, n);
            out[n] = '\0';
            return 1;
        }
        if (end == NULL) break;
        map = end + 1;
    }
    return 0;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    static getaddrinfo_fn real;
    char address[64];
    if (real == NULL) real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    if (node != NULL && listed(node, address, sizeof address)) {
        struct addrinfo numeric;
        memset(&numeric, 0, sizeof numeric);
        if (hints != NULL) numeric = *hints;
        /* The address as written, whatever interfaces the machine has (loopback only, often). */
        numeric.ai_flags = (numeric.ai_flags & ~AI_ADDRCONFIG) | AI_NUMERICHOST;
        return real(address, service, &numeric, res);
    }
    return real(node, service, hints, res);
}
