"""MPICH test-list entries that are not run in any configuration, with the
reason.  Excluded alike for every configuration, so the pass counts stay
comparable.  Matched on (row, program); 'min_np' entries are excluded only
when the rank cap (--maxnp) is below what the test needs; 'args' (a
substring of the entry's arguments) narrows an entry to some lines.
"""

MPI4 = "uses MPI-4 functions Open MPI 4.1 lacks"

EXCLUDE = [
    # MPI-4 functions (the program does not build against Open MPI 4.1)
    {"row": "pt2pt", "prog": "isendrecv", "why": MPI4 + " (MPI_Isendrecv)"},
    {"row": "pt2pt", "prog": "isendrecv_replace", "why": MPI4 + " (MPI_Isendrecv_replace)"},
    {"row": "pt2pt", "prog": "pt2pt_large", "why": MPI4 + " (MPI_Send_c, MPI_Recv_c)"},
    {"row": "coll", "prog": "coll_large", "why": MPI4 + " (MPI_Alltoallv_c)"},
    {"row": "datatype", "prog": "type_large", "why": MPI4 + " (MPI_Type_contiguous_c and other _c functions)"},
    {"row": "comm", "prog": "idup_with_info", "why": MPI4 + " (MPI_Comm_idup_with_info)"},
    {"row": "init", "prog": "session", "why": MPI4 + " (MPI_Session_init)"},
    {"row": "init", "prog": "session_mult_init", "why": MPI4 + " (MPI_Session_init)"},
    {"row": "init", "prog": "session_psets", "why": MPI4 + " (MPI_Session_init)"},
    {"row": "init", "prog": "session_self", "why": MPI4 + " (MPI_Session_init)"},
    {"row": "info", "prog": "info_no_init", "why": MPI4 + " (MPI_Info_get_string)"},
    {"row": "info", "prog": "infocreateenv", "why": MPI4 + " (MPI_Info_create_env)"},
    {"row": "info", "prog": "infogetstring", "why": MPI4 + " (MPI_Info_get_string)"},
    {"row": "threads", "prog": "mult_session", "why": MPI4 + " (MPI_Session_init)"},
    {"row": "threads", "prog": "parrived_wait", "why": MPI4 + " (partitioned communication: MPI_Psend_init)"},
]


def reason(entry, maxnp):
    """Why the entry is excluded, or None."""
    for x in EXCLUDE:
        if x["row"] != entry.row or x["prog"] != entry.prog:
            continue
        if "args" in x and x["args"] not in " ".join(entry.args + entry.envs):
            continue
        if "min_np" in x:
            if x["min_np"] > maxnp:
                return "needs %d ranks or more (cap %d): %s" % (x["min_np"], maxnp, x["why"])
            continue
        return x["why"]
    return None
