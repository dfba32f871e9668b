"""The configurations a conformance run compares, and the suite rows.

Every configuration is a list of mpirun arguments.  The first one, ob1 over
vader, is the reference: a test counts against our components only when it
passes there and fails in a configuration that uses them.
"""

REFERENCE = "ob1"

# name -> (mpirun arguments, components it needs, what it exercises)
CONFIGS = {
    "ob1": (["--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp"], [],
            "Open MPI's ob1 over vader (tcp only between jobs: spawn) (reference)"),
    "rdrp": (["--mca", "pml", "rdrp"], ["pml:rdrp"],
             "pml rdrp, default protocols"),
    "rdrp-get": (["--mca", "pml", "rdrp", "--mca", "pml_rdrp_rndv_protocol", "get"], ["pml:rdrp"],
                 "pml rdrp, get rendezvous"),
    "rdrp-put": (["--mca", "pml", "rdrp", "--mca", "pml_rdrp_rndv_protocol", "put"], ["pml:rdrp"],
                 "pml rdrp, put rendezvous"),
    "rdrp-rma": (["--mca", "pml", "rdrp", "--mca", "pml_rdrp_rndv_protocol", "rdrp", "--mca", "pml_rdrp_data_path", "rma"], ["pml:rdrp"],
                 "pml rdrp, rdrp rendezvous over the rma data path"),
    "rdrp-am": (["--mca", "pml", "rdrp", "--mca", "pml_rdrp_rndv_protocol", "rdrp", "--mca", "pml_rdrp_data_path", "am"], ["pml:rdrp"],
                "pml rdrp, rdrp rendezvous over the am data path"),
    "cdag": (["--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp", "--mca", "coll_cdag_priority", "100"],
             ["coll:cdag"], "coll cdag on ob1, inline progress"),
    "cdag-thread": (["--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp", "--mca", "coll_cdag_priority", "100",
                     "--mca", "coll_cdag_progress", "thread"], ["coll:cdag"],
                    "coll cdag on ob1, engine thread"),
    "rdrp-cdag": (["--mca", "pml", "rdrp", "--mca", "coll_cdag_priority", "100"], ["pml:rdrp", "coll:cdag"],
                  "pml rdrp + coll cdag"),
    "credit": (["--mca", "pml", "ob1", "--mca", "btl", "self,credit,tcp"], ["btl:credit"],
               "ob1 over btl credit (tcp only between jobs, as for ob1)"),
}

# MPICH test/mpi rows: (row name, directory, test list)
MPICH_ROWS = [
    ("pt2pt", "pt2pt", "testlist"),
    ("pt2pt/dtp", "pt2pt", "testlist.dtp"),
    ("coll", "coll", "testlist"),
    ("coll/dtp", "coll", "testlist.dtp"),
    ("datatype", "datatype", "testlist"),
    ("comm", "comm", "testlist"),
    ("group", "group", "testlist"),
    ("attr", "attr", "testlist"),
    ("errhan", "errhan", "testlist"),
    ("init", "init", "testlist"),
    ("info", "info", "testlist"),
    ("topo", "topo", "testlist"),
    ("rma", "rma", "testlist"),
    ("threads", "threads", "testlist"),
]

QUICK_ROWS = ["pt2pt", "coll"]
QUICK_CONFIGS = ["ob1", "rdrp-cdag"]
QUICK_MPI4PY_NP = [2]
