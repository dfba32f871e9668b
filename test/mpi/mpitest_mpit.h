/*
 * MPI_T helpers shared by the tests that check pml/rdrp's guarantees
 * through its control and performance variables.  Tests must call
 * MPI_T_init_thread before and MPI_T_finalize before MPI_Finalize (Open
 * MPI 4.1.4 crashes in an MPI_T_finalize that comes after it).
 */
#ifndef MPITEST_MPIT_H
#define MPITEST_MPIT_H
#include "mpitest.h"

/* The index and datatype of the control variable called name; 0 if
 * there is none. */
static inline int cvar_find(const char *name, int *index, MPI_Datatype *dt)
{
    int n, i;
    MPI_T_cvar_get_num(&n);
    for (i = 0; i < n; i++) {
        char nm[256], desc[1024];
        int nl = sizeof nm, dl = sizeof desc, verb, bind, scope;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, nm, &nl, &verb, dt, &en, desc, &dl, &bind, &scope) == MPI_SUCCESS &&
            strcmp(nm, name) == 0) {
            *index = i;
            return 1;
        }
    }
    return 0;
}

static inline int cvar_int(const char *name, long long *out)
{
    int i, cnt;
    MPI_Datatype dt;
    MPI_T_cvar_handle h;
    if (!cvar_find(name, &i, &dt) || MPI_T_cvar_handle_alloc(i, NULL, &h, &cnt) != MPI_SUCCESS) return 0;
    if (dt == MPI_INT) {
        int v;
        MPI_T_cvar_read(h, &v);
        *out = v;
    } else if (dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_LONG_LONG) {
        unsigned long long v;
        MPI_T_cvar_read(h, &v);
        *out = (long long)v;
    } else if (dt == MPI_UNSIGNED_LONG || dt == MPI_LONG) {
        unsigned long v;
        MPI_T_cvar_read(h, &v);
        *out = (long long)v;
    } else {
        MPI_T_cvar_handle_free(&h);
        return 0;
    }
    MPI_T_cvar_handle_free(&h);
    return 1;
}

/* Write an int control variable: 1 if it exists and took the value, 0 if
 * there is none of that name, -1 if the write was refused. */
static inline int cvar_write_int(const char *name, int value)
{
    int i, cnt, rc;
    MPI_Datatype dt;
    MPI_T_cvar_handle h;
    if (!cvar_find(name, &i, &dt)) return 0;
    if (dt != MPI_INT || MPI_T_cvar_handle_alloc(i, NULL, &h, &cnt) != MPI_SUCCESS) return -1;
    rc = MPI_T_cvar_write(h, &value);
    MPI_T_cvar_handle_free(&h);
    return rc == MPI_SUCCESS ? 1 : -1;
}

typedef struct {
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    int ok;
} pvar_t;

static inline void pvar_open(pvar_t *p, const char *name)
{
    int n, i;
    p->ok = 0;
    MPI_T_pvar_session_create(&p->s);
    MPI_T_pvar_get_num(&n);
    for (i = 0; i < n; i++) {
        char nm[256], desc[1024];
        int nl = sizeof nm, dl = sizeof desc, verb, cls, bind, ro, cont, atomic, cnt;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS ||
            strcmp(nm, name) != 0)
            continue;
        if (MPI_T_pvar_handle_alloc(p->s, i, NULL, &p->h, &cnt) == MPI_SUCCESS) p->ok = 1;
        return;
    }
}

static inline unsigned long pvar_read(pvar_t *p)
{
    unsigned long v = 0;
    if (p->ok) MPI_T_pvar_read(p->s, p->h, &v);
    return v;
}

static inline void pvar_close(pvar_t *p)
{
    if (p->ok) MPI_T_pvar_handle_free(p->s, &p->h);
    MPI_T_pvar_session_free(&p->s);
}

#endif
