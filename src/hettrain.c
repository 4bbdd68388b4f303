/* hettrain: CLI entry point (stub until the trainer lands). */
#include <stdio.h>
#include <string.h>

#include "ocl/ocl.h"

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--list-devices")) ht_ocl_print_devices(stdout);
    return 0;
}
