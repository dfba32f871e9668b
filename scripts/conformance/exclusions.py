"""MPICH test-list entries that are not run in any configuration, with the
reason.  Excluded alike for every configuration, so the pass counts stay
comparable.  Matched on (row, program); 'min_np' entries are excluded only
when the rank cap (--maxnp) is below what the test needs; 'capped' entries
only on the lines whose listed rank count the cap lowers (the program cannot
run at the lower count); 'args' (a substring of the entry's arguments)
narrows an entry to some lines.
"""

MPI4 = "uses MPI-4 functions Open MPI 4.1 lacks"
MSGNULL = ("compares an MPI_Message with MPI_REQUEST_NULL before each MPI_Improbe (mt_probe_impl.c, "
           "probetest_invoke_probe): MPICH defines MPI_MESSAGE_NULL as MPI_REQUEST_NULL, Open MPI's are two "
           "handles, so every poll counts an error; compared with MPI_MESSAGE_NULL instead, all four lines "
           "pass under ob1 and rdrp")
DIV10 = "its rank count must divide 10 ('Number of processors must divide 10', then MPI_Abort)"
IDUP = ("keeps several MPI_Comm_idup of one communicator outstanding at once, which Open MPI 4.1 cannot do "
        "reliably: each idup agrees on its context id by nonblocking collectives on the parent that it starts "
        "from its progress callback as its previous step completes, so ranks can start them in different "
        "orders (open-mpi/ompi#2025, open); it hangs with nothing of ours loaded (pml ob1, btl "
        "self,vader,tcp, coll tuned, np 4, alone: comm_idup_isend in 2 of 6 and 4 of 4 runs, comm_idup_nb "
        "4 of 6 and 4 of 4, idup_comm_gen 2 of 4 and 4 of 4; idup_nb fails at once) -- reduced to "
        "scripts/conformance/repro/idup_intercomm.c")

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
    # the suite's own check assumes MPICH's handle values (every line of these, with ob1 too)
    {"row": "threads", "prog": "mt_improbe_sendrecv", "why": MSGNULL},
    {"row": "threads", "prog": "mt_improbe_isendrecv", "why": MSGNULL},
    {"row": "threads", "prog": "mt_improbe_sendrecv_huge", "why": MSGNULL},
    # Open MPI's concurrent idup (hangs under ob1 + coll tuned as well; README, "Validate before you deploy")
    {"row": "comm", "prog": "comm_idup_nb", "why": IDUP},
    {"row": "comm", "prog": "comm_idup_isend", "why": IDUP},
    {"row": "threads", "prog": "idup_comm_gen", "why": IDUP},
    {"row": "threads", "prog": "idup_nb", "why": IDUP},
    # listed at 5 ranks and unable to run at fewer but 1 and 2 (coll2.c, coll6.c, coll7.c, gatherv.c)
    {"row": "coll", "prog": "coll2", "capped": True, "why": DIV10},
    {"row": "coll", "prog": "nbcoll2", "capped": True, "why": DIV10 + " (coll2.c with nonblocking calls)"},
    {"row": "coll", "prog": "coll6", "capped": True, "why": DIV10},
    {"row": "coll", "prog": "coll7", "capped": True, "why": DIV10},
    {"row": "coll", "prog": "gatherv", "capped": True, "why": DIV10},
]


def reason(entry, maxnp):
    """Why the entry is excluded, or None."""
    for x in EXCLUDE:
        if x["row"] != entry.row or x["prog"] != entry.prog:
            continue
        if "args" in x and x["args"] not in " ".join(entry.args + entry.envs):
            continue
        if x.get("capped"):
            if entry.np_listed > maxnp:
                return "needs %d ranks (cap %d): %s" % (entry.np_listed, maxnp, x["why"])
            continue
        if "min_np" in x:
            if x["min_np"] > maxnp:
                return "needs %d ranks or more (cap %d): %s" % (x["min_np"], maxnp, x["why"])
            continue
        return x["why"]
    return None
