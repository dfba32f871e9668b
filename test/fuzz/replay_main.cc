/*
 * Corpus replay without libFuzzer: runs one fuzz target's
 * LLVMFuzzerTestOneInput over every file of the directories (or files)
 * given, so the unit test run exercises each target with its committed
 * corpus (a regression input that crashed once stays in the corpus) with
 * any compiler.  Prints "replayed N inputs"; a finding aborts, as under
 * libFuzzer.
 */
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned replay_file(const std::string &path)
{
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    return 1;
}

int main(int argc, char **argv)
{
    unsigned n = 0;
    for (int i = 1; i < argc; ++i) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "%s: no such corpus\n", argv[i]);
            return 2;
        }
        if (!S_ISDIR(sb.st_mode)) {
            n += replay_file(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        while (struct dirent *e = d ? readdir(d) : nullptr)
            if (e->d_name[0] != '.') n += replay_file(std::string(argv[i]) + "/" + e->d_name);
        if (d) closedir(d);
    }
    printf("replayed %u inputs\n", n);
    return n ? 0 : 1;
}
