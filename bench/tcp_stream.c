/*
 * tcp_stream -- the payload rate a plain TCP connection gets across the
 * cluster's link: the reference "link rate" the xhost part compares the PMLs
 * with (a shaped port's tbf counts L2 bytes, so TCP's payload rate sits some
 * 4.4 % below the nominal rate, plus what the reverse direction's ACKs take).
 *
 *   tcp_stream -l PORT                      serve one connection, then exit
 *   tcp_stream -c ADDR PORT [-t SECS] [-b]  stream for SECS (default 5);
 *                                           -b: both directions at once
 *
 * One connection, like an MPI pair over btl/tcp or UCX's tcp transport: each
 * side sends 1 MiB write()s from one thread and reads from another.  Each
 * side prints "recv MB/s X" for the bytes it received (MB = 10^6 bytes),
 * timed from its first received byte to the end of the stream.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 1 << 20 };
static int fd;
static double secs = 5;
static volatile int stop;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *sender(void *arg)
{
    (void)arg;
    char *b = malloc(CHUNK);
    memset(b, 0x5a, CHUNK);
    double end = now() + secs;
    while (now() < end)
        if (write(fd, b, CHUNK) < 0) break;
    shutdown(fd, SHUT_WR); /* the peer's reader sees the end of the stream */
    free(b);
    return NULL;
}

static void *receiver(void *arg)
{
    (void)arg;
    char *b = malloc(CHUNK);
    long long bytes = 0;
    double t0 = 0, t1 = 0;
    for (;;) {
        ssize_t n = read(fd, b, CHUNK);
        if (n <= 0) break;
        if (!bytes) t0 = now();
        bytes += n;
        t1 = now();
    }
    if (bytes && t1 > t0) printf("recv MB/s %.1f bytes %lld secs %.2f\n", bytes / (t1 - t0) / 1e6, bytes, t1 - t0);
    else printf("recv MB/s 0\n");
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    int listen_port = 0, both = 0;
    const char *addr = NULL;
    int port = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-l") && i + 1 < argc) listen_port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 2 < argc) { addr = argv[++i]; port = atoi(argv[++i]); }
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "-b")) both = 1;
        else { fprintf(stderr, "usage: tcp_stream -l PORT | -c ADDR PORT [-t SECS] [-b]\n"); return 2; }
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    int one = 1;
    if (listen_port) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sa.sin_port = htons(listen_port);
        if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1)) { perror("bind/listen"); return 1; }
        fd = accept(l, NULL, NULL);
        close(l);
        if (fd < 0) { perror("accept"); return 1; }
        /* the client's first byte says whether we send too */
        char mode;
        if (read(fd, &mode, 1) != 1) return 1;
        both = mode == 'b';
        if (both && read(fd, &secs, sizeof(secs)) != sizeof(secs)) return 1;
    } else if (addr) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        sa.sin_port = htons(port);
        inet_pton(AF_INET, addr, &sa.sin_addr);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) { perror("connect"); return 1; }
        char mode = both ? 'b' : 'o';
        if (write(fd, &mode, 1) != 1) return 1;
        if (both && write(fd, &secs, sizeof(secs)) != sizeof(secs)) return 1;
    } else {
        fprintf(stderr, "usage: tcp_stream -l PORT | -c ADDR PORT [-t SECS] [-b]\n");
        return 2;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    pthread_t s, r;
    int sends = addr || both, recvs = listen_port || both;
    if (sends) pthread_create(&s, NULL, sender, NULL);
    if (recvs) pthread_create(&r, NULL, receiver, NULL);
    if (sends) pthread_join(s, NULL);
    if (recvs) pthread_join(r, NULL);
    close(fd);
    return 0;
}
