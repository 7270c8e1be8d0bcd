   f   r   o   m       o   p   e   n   a   i       i   m   p   o
   r   t       O   p   e   n   A   I  \n  \n   c   l   i   e   n
   t       =       O   p   e   n   A   I   (   a   p   i   _   k
   e   y   =   "   s   k   -   p   r   o   j   -   D   g   D   5
   R   r   _   v   Z   V   y   l   w   B   5   f   8   F   g   m
   W   r   z   j   -   b   A   T   G   P   5   X   y   f   j   w
   T   V   j   V   j   u   U   T   b   B   a   h   F   _   c   0
   x   r   c   o   e   Z   R   E   5   l   y   O   p   r   u   -
   g   C   a   d   f   J   T   3   B   l   b   k   F   J   i   g
   0   0   p   p   B   O   n   K   B   Z   K   e   V   x   f   W
   i   d   7   _   c   V   B   R   J   5   5   v   Y   p   R   k
   N   7   4   J   1   D   i   Q   b   z   M   D   3   -   e   F
   m   7   D   4   C   u   7   W   D   o   l   i   j   d   5   c
   g   c   r   -   a   1   0   G   "   )  \n   p   r   i   n   t
   (   c   l   i   e   n   t   .   m   o   d   e   l   s   .   l
   i   s   t   (   )   )  \n
