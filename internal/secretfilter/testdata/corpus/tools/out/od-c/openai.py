0000000   f   r   o   m       o   p   e   n   a   i       i   m   p   o
0000020   r   t       O   p   e   n   A   I  \n  \n   c   l   i   e   n
0000040   t       =       O   p   e   n   A   I   (   a   p   i   _   k
0000060   e   y   =   "   s   k   -   p   r   o   j   -   D   g   D   5
0000100   R   r   _   v   Z   V   y   l   w   B   5   f   8   F   g   m
0000120   W   r   z   j   -   b   A   T   G   P   5   X   y   f   j   w
0000140   T   V   j   V   j   u   U   T   b   B   a   h   F   _   c   0
0000160   x   r   c   o   e   Z   R   E   5   l   y   O   p   r   u   -
0000200   g   C   a   d   f   J   T   3   B   l   b   k   F   J   i   g
0000220   0   0   p   p   B   O   n   K   B   Z   K   e   V   x   f   W
0000240   i   d   7   _   c   V   B   R   J   5   5   v   Y   p   R   k
0000260   N   7   4   J   1   D   i   Q   b   z   M   D   3   -   e   F
0000300   m   7   D   4   C   u   7   W   D   o   l   i   j   d   5   c
0000320   g   c   r   -   a   1   0   G   "   )  \n   p   r   i   n   t
0000340   (   c   l   i   e   n   t   .   m   o   d   e   l   s   .   l
0000360   i   s   t   (   )   )  \n
0000367
