/* placeholder: being written */
#include <stdio.h>
int main(void) { fprintf(stderr, "not written yet\n"); return 1; }
